// CPU entry points for aggregation: the baseline-ISA kernels, and the run-time switch to the
// AVX2+FMA build of the same code (aggregate_cpu_avx2.cpp) where the CPU has it, and for float32
// sums to the AVX-512 kernel (aggregate_sum_avx512.cpp) where it has that.
#define GALFAST_CPU_ISA baseline
#include "aggregate/aggregate_cpu_impl.h"
#include "aggregate/aggregate_sum_avx512.h"
#include "common/cpu_isa.h"

namespace galfast {

#if defined(GALFAST_X86_DISPATCH)
namespace avx2 {
void aggregate(const AggregateParams& p);
void edge_grad(const EdgeGradParams& p);
}  // namespace avx2
#endif

std::atomic<bool>& aggregate_simd_allowed() {
  static std::atomic<bool> allowed{true};
  return allowed;
}

void aggregate_cpu(const AggregateParams& p) {
#if defined(GALFAST_X86_DISPATCH)
  if (aggregate512::handles(p) && aggregate_simd_allowed().load(std::memory_order_relaxed) &&
      aggregate512::supported()) {
    return aggregate512::sum(p);
  }
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
