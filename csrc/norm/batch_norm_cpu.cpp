// CPU entry points for the batch normalisation kernels: the baseline-ISA build, and the run-time
// switch to the AVX2+FMA build of the same code (batch_norm_cpu_avx2.cpp) where the CPU has it.
#define GALFAST_CPU_ISA baseline
#include "common/cpu_isa.h"
#include "norm/batch_norm_cpu_impl.h"

namespace galfast {

#if defined(GALFAST_X86_DISPATCH)
namespace avx2 {
void batch_norm(const BatchNormParams& p);
void batch_norm_backward(const BatchNormBackwardParams& p);
}  // namespace avx2
#endif

void batch_norm_cpu(const BatchNormParams& p) {
#if defined(GALFAST_X86_DISPATCH)
  if (cpu_has_avx2_fma()) return avx2::batch_norm(p);
#endif
  baseline::batch_norm(p);
}

void batch_norm_backward_cpu(const BatchNormBackwardParams& p) {
#if defined(GALFAST_X86_DISPATCH)
  if (cpu_has_avx2_fma()) return avx2::batch_norm_backward(p);
#endif
  baseline::batch_norm_backward(p);
}

// C values at most: no vector build needed.
void batch_norm_update_running_cpu(const BatchNormRunningParams& p) {
  baseline::batch_norm_update_running(p);
}

}  // namespace galfast
