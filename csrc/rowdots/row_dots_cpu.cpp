// CPU entry point of the row-dot gradients: the baseline-ISA build, and the run-time switch to
// the AVX2+FMA build of the same code (row_dots_cpu_avx2.cpp) where the CPU has it.
#define GALFAST_CPU_ISA baseline
#include "common/cpu_isa.h"
#include "rowdots/row_dots_cpu_impl.h"

namespace galfast {

#if defined(GALFAST_X86_DISPATCH)
namespace avx2 {
void row_dots_backward(const RowDotsBackwardParams& p);
}  // namespace avx2
#endif

void row_dots_backward_cpu(const RowDotsBackwardParams& p) {
#if defined(GALFAST_X86_DISPATCH)
  if (cpu_has_avx2_fma()) return avx2::row_dots_backward(p);
#endif
  baseline::row_dots_backward(p);
}

}  // namespace galfast
