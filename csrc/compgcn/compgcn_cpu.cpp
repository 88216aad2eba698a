// CPU entry points for the CompGCN kernels: the baseline-ISA build, and the run-time switch to
// the AVX2+FMA build of the same code (compgcn_cpu_avx2.cpp) where the CPU has it.
#define GALFAST_CPU_ISA baseline
#include "common/cpu_isa.h"
#include "compgcn/compgcn_cpu_impl.h"

namespace galfast {

#if defined(GALFAST_X86_DISPATCH)
namespace avx2 {
void compgcn_aggregate(const CompgcnParams& p);
void compgcn_rel_grad(const RelGradParams& p);
}  // namespace avx2
#endif

void compgcn_aggregate_cpu(const CompgcnParams& p) {
#if defined(GALFAST_X86_DISPATCH)
  if (cpu_has_avx2_fma()) return avx2::compgcn_aggregate(p);
#endif
  baseline::compgcn_aggregate(p);
}

void compgcn_rel_grad_cpu(const RelGradParams& p) {
#if defined(GALFAST_X86_DISPATCH)
  if (cpu_has_avx2_fma()) return avx2::compgcn_rel_grad(p);
#endif
  baseline::compgcn_rel_grad(p);
}

}  // namespace galfast
