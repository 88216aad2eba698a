// The CPU CompGCN kernels compiled with -mavx2 -mfma (see CMakeLists.txt); chosen at run time by
// compgcn_cpu.cpp.
#if defined(__x86_64__) || defined(_M_X64)
#define GALFAST_CPU_ISA avx2
#include "compgcn/compgcn_cpu_impl.h"
#endif
