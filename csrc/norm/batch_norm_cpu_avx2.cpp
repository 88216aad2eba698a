// The CPU batch normalisation kernels compiled with -mavx2 -mfma (see CMakeLists.txt); chosen at
// run time by batch_norm_cpu.cpp.
#if defined(__x86_64__) || defined(_M_X64)
#define GALFAST_CPU_ISA avx2
#include "norm/batch_norm_cpu_impl.h"
#endif
