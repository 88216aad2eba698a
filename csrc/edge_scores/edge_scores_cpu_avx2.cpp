// The CPU fused bilinear edge scores compiled with -mavx2 -mfma (see CMakeLists.txt); chosen at
// run time by edge_scores_cpu.cpp.
#if defined(__x86_64__) || defined(_M_X64)
#define GALFAST_CPU_ISA avx2
#include "edge_scores/edge_scores_cpu_impl.h"
#endif
