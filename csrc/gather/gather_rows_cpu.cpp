// CPU entry points of the row gather and scatter-add: the baseline-ISA build, and the run-time
// switch to the AVX2+FMA build of the same code (gather_rows_cpu_avx2.cpp) where the CPU has it.
#define GALFAST_CPU_ISA baseline
#include "common/cpu_isa.h"
#include "gather/gather_rows_cpu_impl.h"

namespace galfast {

#if defined(GALFAST_X86_DISPATCH)
namespace avx2 {
void gather_rows(const GatherRowsParams& p);
void scatter_add_rows(const GatherRowsParams& p);
}  // namespace avx2
#endif

void gather_rows_cpu(const GatherRowsParams& p) {
#if defined(GALFAST_X86_DISPATCH)
  if (cpu_has_avx2_fma()) return avx2::gather_rows(p);
#endif
  baseline::gather_rows(p);
}

void scatter_add_rows_cpu(const GatherRowsParams& p) {
#if defined(GALFAST_X86_DISPATCH)
  if (cpu_has_avx2_fma()) return avx2::scatter_add_rows(p);
#endif
  baseline::scatter_add_rows(p);
}

}  // namespace galfast
