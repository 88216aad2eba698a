// The CPU NNConv kernels compiled with -mavx2 -mfma (see CMakeLists.txt); chosen at run time
// by nnconv_cpu.cpp.
#if defined(__x86_64__) || defined(_M_X64)
#define GALFAST_CPU_ISA avx2
#include "nnconv/nnconv_cpu_fused_impl.h"
#include "nnconv/nnconv_cpu_impl.h"
#endif
