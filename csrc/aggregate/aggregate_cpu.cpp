// CPU entry points for aggregation: the baseline-ISA kernels, and the run-time switch to the
// AVX2+FMA build of the same code (aggregate_cpu_avx2.cpp) where the CPU has it.
#define GALFAST_CPU_ISA baseline
#include "aggregate/aggregate_cpu_impl.h"
#include "common/cpu_isa.h"

namespace galfast {

#if defined(GALFAST_X86_DISPATCH)
namespace avx2 {
void aggregate(const AggregateParams& p);
void edge_grad(const EdgeGradParams& p);
}  // namespace avx2
#endif

void aggregate_cpu(const AggregateParams& p) {
#if defined(GALFAST_X86_DISPATCH)
  if (cpu_has_avx2_fma()) return avx2::aggregate(p);
#endif
  baseline::aggregate(p);
}

void edge_grad_cpu(const EdgeGradParams& p) {
#if defined(GALFAST_X86_DISPATCH)
  if (cpu_has_avx2_fma()) return avx2::edge_grad(p);
#endif
  baseline::edge_grad(p);
}

}  // namespace galfast
