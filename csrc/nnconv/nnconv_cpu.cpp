// CPU entry points for NNConv: the dtype check, then the baseline-ISA kernels or, where the
// CPU has it, the AVX2+FMA build of the same code (nnconv_cpu_avx2.cpp).
#define GALFAST_CPU_ISA baseline
#include "common/cpu_isa.h"
#include "nnconv/nnconv_cpu_fused_impl.h"
#include "nnconv/nnconv_cpu_impl.h"

namespace galfast {

#if defined(GALFAST_X86_DISPATCH)
namespace avx2 {
void nnconv_forward(const NnconvParams& p);
void nnconv_edge_grad(const NnconvEdgeGradParams& p);
void nnconv_grad_x(const NnconvGradXParams& p);
void nnconv_fused_forward(const NnconvFusedParams& p);
void nnconv_fused_backward(const NnconvFusedParams& p);
}  // namespace avx2
#endif

void nnconv_forward_cpu(const NnconvParams& p) {
  require_cpu_dtype(p.dtype, "nnconv_aggregate");
#if defined(GALFAST_X86_DISPATCH)
  if (cpu_has_avx2_fma()) return avx2::nnconv_forward(p);
#endif
  baseline::nnconv_forward(p);
}

void nnconv_edge_grad_cpu(const NnconvEdgeGradParams& p) {
  require_cpu_dtype(p.dtype, "nnconv_aggregate backward");
#if defined(GALFAST_X86_DISPATCH)
  if (cpu_has_avx2_fma()) return avx2::nnconv_edge_grad(p);
#endif
  baseline::nnconv_edge_grad(p);
}

void nnconv_fused_forward_cpu(const NnconvFusedParams& p) {
  require_cpu_dtype(p.dtype, "nnconv_aggregate");
#if defined(GALFAST_X86_DISPATCH)
  if (cpu_has_avx2_fma()) return avx2::nnconv_fused_forward(p);
#endif
  baseline::nnconv_fused_forward(p);
}

void nnconv_fused_backward_cpu(const NnconvFusedParams& p) {
  require_cpu_dtype(p.dtype, "nnconv_aggregate backward");
#if defined(GALFAST_X86_DISPATCH)
  if (cpu_has_avx2_fma()) return avx2::nnconv_fused_backward(p);
#endif
  baseline::nnconv_fused_backward(p);
}

void nnconv_grad_x_cpu(const NnconvGradXParams& p) {
  require_cpu_dtype(p.dtype, "nnconv_aggregate backward");
#if defined(GALFAST_X86_DISPATCH)
  if (cpu_has_avx2_fma()) return avx2::nnconv_grad_x(p);
#endif
  baseline::nnconv_grad_x(p);
}

}  // namespace galfast
