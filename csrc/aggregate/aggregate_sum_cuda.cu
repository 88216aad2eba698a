// CUDA weighted sum over a segment plan (aggregate.h, galfast/ops/segment_plan.py): every row
// is cut into segments of at most `seg_edges` consecutive edges, so each warp gets about the
// same work however skewed the degrees are, and no warp walks a hub's thousands of edges alone.
//
// Segment kernel thread mapping: one warp per segment. A row of x is read as vectors of V
// elements (16 bytes where F and x's alignment allow, else one element); kLanes lanes (the
// smallest of 4, 8, 16, 32 covering F / V vectors) hold one edge's row, so the warp takes
// 32 / kLanes edges at a time, one per lane group. The warp walks its segment in chunks of 32
// edges: lane j loads edge j's int32 column and factor in one coalesced read, then the groups
// take the chunk's edges from registers by shuffle, four steps unrolled so that several feature
// loads are in flight. Each group sums its edges in order; the groups are then added in a fixed
// shuffle tree. A row of one segment is written to out; the segments of a split row write their
// sums to `partial` (row s for segment s), which the combine kernel (one thread per row and
// feature) adds in segment order. No atomics: the result is the same on every run.
#include <cstdint>

#include "aggregate/aggregate.h"
#include "aggregate/aggregate_row.h"
#include "common/cuda_check.h"
#include "common/cuda_types.cuh"

namespace galfast {
namespace {

constexpr int kThreads = 256;
constexpr unsigned kFullMask = 0xffffffffu;

// V elements of one row, loaded and stored as one vector when V * sizeof(T) is 16 bytes.
template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

// The plan's three arrays inside the one int64 tensor that carries it.
struct SegmentView {
  const int64_t* begin;    // [S + 1] first edge of each segment; begin[S] = nnz
  const int64_t* row;      // [S]
  const int64_t* row_ptr;  // [R + 1] segments of row r: row_ptr[r] .. row_ptr[r + 1]
};

__device__ __forceinline__ SegmentView segment_view(const AggregateParams& p) {
  const int64_t s = p.num_segments;
  return {p.segments, p.segments + s + 1, p.segments + 2 * s + 1};
}

template <typename T, int V, int kLanes>
__global__ void __launch_bounds__(kThreads) aggregate_sum_segments_kernel(AggregateParams p) {
  using Acc = acc_t<T>;
  constexpr int kEdgesPerStep = 32 / kLanes;
  const int64_t s = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) / 32;
  if (s >= p.num_segments) return;  // s is uniform across a warp: whole warps leave
  const int lane = threadIdx.x % 32, group = lane / kLanes;
  const SegmentView seg = segment_view(p);
  const int64_t begin = seg.begin[s], end = seg.begin[s + 1], r = seg.row[s];
  const bool split = seg.row_ptr[r + 1] - seg.row_ptr[r] > 1;
  const int64_t F = p.num_features;
  const T* x = static_cast<const T*>(p.x);
  for (int64_t f0 = 0; f0 < F; f0 += kLanes * V) {
    const int64_t f = f0 + static_cast<int64_t>(lane % kLanes) * V;
    const bool active = f < F;  // F is a multiple of V, so the whole vector is in range
    Acc acc[V];
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] = Acc(0);
    for (int64_t e0 = begin; e0 < end; e0 += 32) {
      int32_t mine_c = 0;
      Acc mine_w = Acc(0);
      if (e0 + lane < end) {
        mine_c = p.col32[e0 + lane];
        mine_w = edge_factor<T, Acc>(p, r, mine_c, e0 + lane);
      }
      const int n = end - e0 < 32 ? static_cast<int>(end - e0) : 32;
#pragma unroll 4
      for (int t = 0; t < n; t += kEdgesPerStep) {
        const int src = t + group;  // < 32: t is a multiple of kEdgesPerStep below n <= 32
        const int32_t c = __shfl_sync(kFullMask, mine_c, src);
        const Acc w = __shfl_sync(kFullMask, mine_w, src);
        if (src < n && active) {
          const Pack<T, V> xv =
              *reinterpret_cast<const Pack<T, V>*>(x + static_cast<int64_t>(c) * F + f);
#pragma unroll
          for (int k = 0; k < V; ++k) acc[k] += w * to_acc(xv.v[k]);
        }
      }
    }
#pragma unroll
    for (int offset = 16; offset >= kLanes; offset /= 2) {
#pragma unroll
      for (int k = 0; k < V; ++k) acc[k] += __shfl_down_sync(kFullMask, acc[k], offset);
    }
    if (group != 0 || !active) continue;
    if (split) {
      Pack<Acc, V> out;
#pragma unroll
      for (int k = 0; k < V; ++k) out.v[k] = acc[k];
      *reinterpret_cast<Pack<Acc, V>*>(static_cast<Acc*>(p.partial) + s * F + f) = out;
    } else {
      Pack<T, V> out;
#pragma unroll
      for (int k = 0; k < V; ++k) out.v[k] = from_acc<T>(acc[k]);
      *reinterpret_cast<Pack<T, V>*>(static_cast<T*>(p.out) + r * F + f) = out;
    }
  }
}

template <typename T>
__global__ void aggregate_sum_combine_kernel(AggregateParams p) {
  using Acc = acc_t<T>;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  const int64_t F = p.num_features;
  if (i >= p.num_rows * F) return;
  const int64_t r = i / F, f = i % F;
  const SegmentView seg = segment_view(p);
  const int64_t first = seg.row_ptr[r], last = seg.row_ptr[r + 1];
  if (last - first <= 1) return;  // written by its one segment
  const Acc* partial = static_cast<const Acc*>(p.partial);
  Acc total = Acc(0);
  for (int64_t s = first; s < last; ++s) total += partial[s * F + f];
  static_cast<T*>(p.out)[r * F + f] = from_acc<T>(total);
}

template <typename T, int V>
void launch_segments(const AggregateParams& p, cudaStream_t stream) {
  const int64_t vectors = (p.num_features + V - 1) / V;
  const int64_t blocks = (p.num_segments * 32 + kThreads - 1) / kThreads;
  const unsigned grid = grid_size(blocks, "aggregate_sum_segments_kernel");
  if (vectors <= 4) {
    aggregate_sum_segments_kernel<T, V, 4><<<grid, kThreads, 0, stream>>>(p);
  } else if (vectors <= 8) {
    aggregate_sum_segments_kernel<T, V, 8><<<grid, kThreads, 0, stream>>>(p);
  } else if (vectors <= 16) {
    aggregate_sum_segments_kernel<T, V, 16><<<grid, kThreads, 0, stream>>>(p);
  } else {
    aggregate_sum_segments_kernel<T, V, 32><<<grid, kThreads, 0, stream>>>(p);
  }
  GALFAST_CHECK_LAUNCH("aggregate_sum_segments_kernel");
}

}  // namespace

void aggregate_sum_segments_cuda(const AggregateParams& p, void* stream_ptr) {
  if (p.num_segments == 0 || p.num_features == 0) return;
  const auto stream = static_cast<cudaStream_t>(stream_ptr);
  dispatch_cuda_dtype(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int kVec = 16 / sizeof(T);
    // Whole 16-byte vectors need every row of x and out to start on a 16-byte boundary.
    const bool aligned = p.num_features % kVec == 0 &&
                         reinterpret_cast<std::uintptr_t>(p.x) % 16 == 0 &&
                         reinterpret_cast<std::uintptr_t>(p.out) % 16 == 0 &&
                         reinterpret_cast<std::uintptr_t>(p.partial) % 16 == 0;
    if (aligned) {
      launch_segments<T, kVec>(p, stream);
    } else {
      launch_segments<T, 1>(p, stream);
    }
    if (p.num_segments > p.num_rows) {  // some row is split
      const int64_t blocks = (p.num_rows * p.num_features + kThreads - 1) / kThreads;
      aggregate_sum_combine_kernel<T>
          <<<grid_size(blocks, "aggregate_sum_combine_kernel"), kThreads, 0, stream>>>(p);
      GALFAST_CHECK_LAUNCH("aggregate_sum_combine_kernel");
    }
  });
}

}  // namespace galfast
