// CUDA neighbour sampling. Thread mapping: one thread per destination, in both phases; it
// reads the destination's row bounds, then counts (count phase) or draws and writes its edges
// (sample phase) with the per-destination maths of sample_neighbors_row.h. Neighbouring threads
// take neighbouring destinations, so the reads of dst and out_rowptr coalesce; a destination's
// edges are written contiguously by its thread.
#include <cstdint>

#include "common/cuda_check.h"
#include "sampler/sample_neighbors.h"
#include "sampler/sample_neighbors_row.h"

namespace galfast {
namespace {

constexpr int kThreads = 128;

template <typename Weight>
__global__ void count_kernel(SampleNeighborsParams p, const Weight* weight) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.num_dst) return;
  const int64_t v = p.dst[i];
  p.count[i] = sampled_count(p, weight, p.rowptr[v], p.rowptr[v + 1]);
}

template <typename Weight>
__global__ void sample_kernel(SampleNeighborsParams p, const Weight* weight) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.num_dst) return;
  const int64_t v = p.dst[i];
  sample_destination(p, weight, v, p.rowptr[v], p.rowptr[v + 1], i);
}

template <typename Run>
void with_weight_type(const SampleNeighborsParams& p, Run run) {
  if (p.weight != nullptr && p.weight_dtype == DType::kFloat64) {
    run(static_cast<const double*>(p.weight));
  } else {
    run(static_cast<const float*>(p.weight));
  }
}

unsigned blocks_for(const SampleNeighborsParams& p, const char* kernel) {
  return grid_size((p.num_dst + kThreads - 1) / kThreads, kernel);
}

}  // namespace

void sample_neighbors_count_cuda(const SampleNeighborsParams& p, void* stream) {
  if (p.num_dst == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  with_weight_type(p, [&](auto weight) {
    count_kernel<<<blocks_for(p, "sample_neighbors_count"), kThreads, 0, s>>>(p, weight);
    GALFAST_CHECK_LAUNCH("sample_neighbors_count");
  });
}

void sample_neighbors_cuda(const SampleNeighborsParams& p, void* stream) {
  if (p.num_dst == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  with_weight_type(p, [&](auto weight) {
    sample_kernel<<<blocks_for(p, "sample_neighbors"), kThreads, 0, s>>>(p, weight);
    GALFAST_CHECK_LAUNCH("sample_neighbors");
  });
}

}  // namespace galfast
