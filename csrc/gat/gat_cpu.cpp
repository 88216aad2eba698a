// CPU entry points for fused GAT: input checks, then the baseline-ISA kernels or, where the
// CPU has it, the AVX2+FMA build of the same code (gat_cpu_avx2.cpp).
#define GALFAST_CPU_ISA baseline
#include "common/cpu_isa.h"
#include "gat/gat_cpu_impl.h"

namespace galfast {

#if defined(GALFAST_X86_DISPATCH)
namespace avx2 {
void gat_forward(const GatParams& p);
void gat_backward(const GatBackwardParams& p);
}  // namespace avx2
#endif

void gat_forward_cpu(const GatParams& p) {
  require_cpu_dtype(p.dtype, "gat_aggregate");
#if defined(GALFAST_X86_DISPATCH)
  if (cpu_has_avx2_fma()) return avx2::gat_forward(p);
#endif
  baseline::gat_forward(p);
}

void gat_backward_cpu(const GatBackwardParams& p) {
  require_cpu_dtype(p.dtype, "gat_aggregate backward");
#if defined(GALFAST_X86_DISPATCH)
  if (cpu_has_avx2_fma()) return avx2::gat_backward(p);
#endif
  baseline::gat_backward(p);
}

}  // namespace galfast
