// The CPU row-dot gradients compiled with -mavx2 -mfma (see CMakeLists.txt); chosen at run
// time by row_dots_cpu.cpp.
#if defined(__x86_64__) || defined(_M_X64)
#define GALFAST_CPU_ISA avx2
#include "rowdots/row_dots_cpu_impl.h"
#endif
