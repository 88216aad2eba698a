// The CPU row gather and scatter-add compiled with -mavx2 -mfma (see CMakeLists.txt); chosen at
// run time by gather_rows_cpu.cpp.
#if defined(__x86_64__) || defined(_M_X64)
#define GALFAST_CPU_ISA avx2
#include "gather/gather_rows_cpu_impl.h"
#endif
