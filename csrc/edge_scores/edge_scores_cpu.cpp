// CPU entry points of the fused bilinear edge scores: the edges-in-lanes AVX-512 kernel
// (edge_scores_avx512.cpp) for calls marked edges_in_lanes, else the baseline-ISA build, or the
// AVX2+FMA build of the same code (edge_scores_cpu_avx2.cpp) where the CPU has it.
#define GALFAST_CPU_ISA baseline
#include "common/cpu_isa.h"
#include "edge_scores/edge_scores_avx512.h"
#include "edge_scores/edge_scores_cpu_impl.h"

namespace galfast {

#if defined(GALFAST_X86_DISPATCH)
namespace avx2 {
void edge_scores(const EdgeScoresParams& p);
void edge_scores_backward(const EdgeScoresParams& p);
}  // namespace avx2
#endif

int edge_scores_threads(const EdgeScoresParams& p) {
  constexpr int64_t kMinParallelWork = int64_t{1} << 16;
  const int64_t work = p.num_edges * p.num_bases * p.dim * p.dim;
  return work < kMinParallelWork ? 1 : max_threads();
}

void throw_bad_edge_id(const char* which, int64_t b, int64_t value, int64_t num_nodes) {
  throw std::out_of_range("bilinear_edge_scores: " + std::string(which) + "[" + std::to_string(b) +
                          "] = " + std::to_string(value) + " is out of range for " +
                          std::to_string(num_nodes) + " nodes (valid: 0 to num_nodes - 1)");
}

int64_t edge_scores_max_dim(DType dtype) {
  return dtype == DType::kFloat64 ? 8 * kLaneCount<double> : 8 * kLaneCount<float>;
}

int64_t edge_scores_padded_dim(DType dtype, int64_t dim) {
  const int64_t lanes = dtype == DType::kFloat64 ? kLaneCount<double> : kLaneCount<float>;
  return (dim + lanes - 1) / lanes * lanes;
}

void edge_scores_cpu(const EdgeScoresParams& p) {
  if (p.edges_in_lanes) return edge_scores_lanes(p);
#if defined(GALFAST_X86_DISPATCH)
  if (cpu_has_avx2_fma()) return avx2::edge_scores(p);
#endif
  baseline::edge_scores(p);
}

void edge_scores_backward_cpu(const EdgeScoresParams& p) {
  if (p.edges_in_lanes) return edge_scores_lanes_backward(p);
#if defined(GALFAST_X86_DISPATCH)
  if (cpu_has_avx2_fma()) return avx2::edge_scores_backward(p);
#endif
  baseline::edge_scores_backward(p);
}

}  // namespace galfast
