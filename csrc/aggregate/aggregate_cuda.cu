// CUDA aggregation: max, its backward, and sums given no segment plan (a sum with one runs
// aggregate_sum_cuda.cu).
// Row kernel thread mapping: a group of G lanes (G = 8, 16 or 32, the smallest covering F up to
// 32) owns one destination row; lane l accumulates features f0 + l + k*G (k < kVec) in
// registers, so feature loads are coalesced; larger F loops over tiles of G*kVec features. The
// group walks its row in chunks of G edges: lane j loads edge j's column, factor and id (one
// coalesced load instead of G dependent ones), then the group takes the chunk's edges in order
// from registers by shuffle, kUnroll at a time so that kUnroll feature loads are in flight.
// Rows with more than kHubDegree edges are skipped there.
// Hub kernel thread mapping: one block of kHubWarps warps per hub row; warp w takes the 32-edge
// chunks w, w + kHubWarps, ... (loaded and shuffled as above) and lane l feature l of a 32-wide
// tile; partials are combined in warp order through shared memory, so the result is
// deterministic (no atomics).
// Edge-gradient kernel thread mapping: one warp per edge, lanes stride the features, then a
// shuffle reduction.
#include <cstdint>

#include "aggregate/aggregate.h"
#include "aggregate/aggregate_row.h"
#include "common/cuda_check.h"
#include "common/cuda_types.cuh"

namespace galfast {
namespace {

constexpr int kVec = 4;
constexpr int kRowThreads = 256;
constexpr int kHubWarps = 8;
constexpr int kUnroll = 4;

template <typename Acc>
struct Slot {
  Acc val;
  int64_t id;
};

// Folds the contribution of edge `id` (factor w, input value xv) into a slot.
template <AggMode kMode, typename Acc>
__device__ __forceinline__ void fold(Slot<Acc>& s, Acc w, Acc xv, int64_t id, int64_t mask_id) {
  const Acc v = w * xv;
  if constexpr (kMode == AggMode::kMax) {
    if (max_takes(v, s.val, s.id)) {
      s.val = v;
      s.id = id;
    }
  } else if constexpr (kMode == AggMode::kMaskedSum) {
    if (mask_id == id) s.val += v;
  } else {
    s.val += v;
  }
}

// Merges slot b, built from later-or-interleaved edges, into a. For max the smaller edge id
// wins a tie, which reproduces the sequential first-max rule of the CPU kernel.
template <AggMode kMode, typename Acc>
__device__ __forceinline__ void merge(Slot<Acc>& a, const Slot<Acc>& b) {
  if constexpr (kMode == AggMode::kMax) {
    if (b.id < 0) return;
    const bool a_nan = a.val != a.val, b_nan = b.val != b.val;
    const bool tie = (a.val == b.val) || (a_nan && b_nan);
    if (a.id < 0 || (b_nan && !a_nan) || (!a_nan && b.val > a.val) || (tie && b.id < a.id)) a = b;
  } else {
    a.val += b.val;
  }
}

// What every lane of a row needs about edge slot e: its source, factor and identity.
template <typename T>
struct EdgeView {
  int64_t c;
  acc_t<T> w;
  int64_t id;
};

// Lane j of a group of `width` lanes loads slot e0 + j of row r (a zero-factor dummy past end).
template <typename T>
__device__ __forceinline__ EdgeView<T> load_edge(const AggregateParams& p, int64_t r, int64_t e,
                                                 int64_t end) {
  if (e >= end) return {0, acc_t<T>(0), -1};
  const int64_t c = p.col[e];
  return {c, edge_factor<T, acc_t<T>>(p, r, c, e), edge_ident(p, e)};
}

// Lane `src` of the group's copy of an edge view. The id only matters to max and masked sum.
template <typename T, AggMode kMode>
__device__ __forceinline__ EdgeView<T> shuffle_edge(unsigned mask, const EdgeView<T>& ev, int src,
                                                    int width) {
  EdgeView<T> out;
  out.c = __shfl_sync(mask, ev.c, src, width);
  out.w = __shfl_sync(mask, ev.w, src, width);
  out.id = kMode == AggMode::kSum ? 0 : __shfl_sync(mask, ev.id, src, width);
  return out;
}

template <typename T, AggMode kMode>
__device__ __forceinline__ void fold_edge(const AggregateParams& p, const EdgeView<T>& ev,
                                          int64_t f, Slot<acc_t<T>>& s) {
  const int64_t at = ev.c * p.num_features + f;
  const acc_t<T> xv = to_acc(static_cast<const T*>(p.x)[at]);
  const int64_t mask_id = kMode == AggMode::kMaskedSum ? p.mask_arg[at] : 0;
  fold<kMode>(s, ev.w, xv, ev.id, mask_id);
}

// Folds edges [e0, e0 + n) of row r into this lane's kFeat slots (features f[k], valid where
// f[k] < F), in edge order. The group's lanes each load one edge of the chunk; the unrolled
// inner loop lets kUnroll edges' feature loads overlap.
template <typename T, AggMode kMode, int kFeat>
__device__ __forceinline__ void fold_chunk(const AggregateParams& p, int64_t r, int64_t e0,
                                           int64_t end, unsigned mask, int lane, int width,
                                           const int64_t (&f)[kFeat], Slot<acc_t<T>> (&s)[kFeat]) {
  const EdgeView<T> mine = load_edge<T>(p, r, e0 + lane, end);
  const int n = end - e0 < width ? static_cast<int>(end - e0) : width;
#pragma unroll kUnroll
  for (int j = 0; j < n; ++j) {
    const EdgeView<T> ev = shuffle_edge<T, kMode>(mask, mine, j, width);
#pragma unroll
    for (int k = 0; k < kFeat; ++k) {
      if (f[k] < p.num_features) fold_edge<T, kMode>(p, ev, f[k], s[k]);
    }
  }
}

template <typename T, AggMode kMode>
__device__ __forceinline__ void store(const AggregateParams& p, int64_t r, int64_t f,
                                      const Slot<acc_t<T>>& s) {
  static_cast<T*>(p.out)[r * p.num_features + f] = from_acc<T>(s.val);
  if constexpr (kMode == AggMode::kMax) p.arg[r * p.num_features + f] = s.id;
}

template <typename T, AggMode kMode>
__global__ void aggregate_rows_kernel(AggregateParams p, int group) {
  using Acc = acc_t<T>;
  const int64_t thread = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t r = thread / group;
  const int lane = static_cast<int>(thread % group);
  // r is uniform over a group and groups tile warps, so whole groups leave together and the
  // shuffles below only involve the group's own lanes.
  if (r >= p.num_rows) return;
  const int64_t begin = p.rowptr[r], end = p.rowptr[r + 1];
  if (end - begin > kHubDegree) return;
  const unsigned mask =
      group == 32 ? 0xffffffffu : ((1u << group) - 1u) << (threadIdx.x % 32 / group * group);
  const int64_t F = p.num_features;
  for (int64_t f0 = 0; f0 < F; f0 += static_cast<int64_t>(group) * kVec) {
    Slot<Acc> s[kVec];
    int64_t f[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      s[k] = {Acc(0), -1};
      f[k] = f0 + lane + static_cast<int64_t>(k) * group;
    }
    for (int64_t e0 = begin; e0 < end; e0 += group) {
      fold_chunk<T, kMode>(p, r, e0, end, mask, lane, group, f, s);
    }
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      if (f[k] < F) store<T, kMode>(p, r, f[k], s[k]);
    }
  }
}

template <typename T, AggMode kMode>
__global__ void aggregate_hub_kernel(AggregateParams p) {
  using Acc = acc_t<T>;
  __shared__ Slot<Acc> partial[kHubWarps][32];
  const int64_t r = p.hub_rows[blockIdx.x];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t begin = p.rowptr[r], end = p.rowptr[r + 1], F = p.num_features;
  for (int64_t f0 = 0; f0 < F; f0 += 32) {
    const int64_t f[1] = {f0 + lane};
    Slot<Acc> s[1] = {{Acc(0), -1}};
    for (int64_t e0 = begin + 32 * warp; e0 < end; e0 += 32 * kHubWarps) {
      fold_chunk<T, kMode>(p, r, e0, end, 0xffffffffu, lane, 32, f, s);
    }
    partial[warp][lane] = s[0];
    __syncthreads();
    if (warp == 0 && f[0] < F) {
      Slot<Acc> total = partial[0][lane];
      for (int w = 1; w < kHubWarps; ++w) merge<kMode>(total, partial[w][lane]);
      store<T, kMode>(p, r, f[0], total);
    }
    __syncthreads();
  }
}

template <typename T>
__global__ void edge_grad_kernel(EdgeGradParams p) {
  using Acc = acc_t<T>;
  const int64_t e = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (e >= p.num_edges) return;  // whole warps exit together: e is uniform across a warp
  const int64_t r = p.row[e], c = p.col[e], F = p.num_features;
  const T* go = static_cast<const T*>(p.grad_out) + r * F;
  const T* xr = static_cast<const T*>(p.x) + c * F;
  Acc dot = Acc(0);
  for (int64_t f = lane; f < F; f += 32) {
    if (!p.arg || p.arg[r * F + f] == e) dot += to_acc(go[f]) * to_acc(xr[f]);
  }
  for (int offset = 16; offset > 0; offset /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, offset);
  if (lane == 0) {
    if (p.row_scale) dot *= static_cast<const Acc*>(p.row_scale)[r];
    if (p.col_scale) dot *= static_cast<const Acc*>(p.col_scale)[c];
    static_cast<T*>(p.grad_weight)[e] = from_acc<T>(dot);
  }
}

template <typename T, AggMode kMode>
void launch_aggregate(const AggregateParams& p, cudaStream_t stream) {
  const int64_t F = p.num_features;
  const int group = F > 16 ? 32 : (F > 8 ? 16 : 8);
  const int64_t threads = p.num_rows * group;
  const int64_t blocks = (threads + kRowThreads - 1) / kRowThreads;
  if (blocks > 0) {
    aggregate_rows_kernel<T, kMode>
        <<<grid_size(blocks, "aggregate_rows_kernel"), kRowThreads, 0, stream>>>(p, group);
    GALFAST_CHECK_LAUNCH("aggregate_rows_kernel");
  }
  if (p.num_hub_rows > 0) {
    aggregate_hub_kernel<T, kMode>
        <<<grid_size(p.num_hub_rows, "aggregate_hub_kernel"), kHubWarps * 32, 0, stream>>>(p);
    GALFAST_CHECK_LAUNCH("aggregate_hub_kernel");
  }
}

}  // namespace

void aggregate_cuda(const AggregateParams& p, void* stream) {
  if (p.num_features == 0) return;
  if (p.segments) {
    aggregate_sum_segments_cuda(p, stream);
    return;
  }
  const auto s = static_cast<cudaStream_t>(stream);
  dispatch_cuda_dtype(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    switch (p.mode) {
      case AggMode::kSum:
        launch_aggregate<T, AggMode::kSum>(p, s);
        break;
      case AggMode::kMax:
        launch_aggregate<T, AggMode::kMax>(p, s);
        break;
      case AggMode::kMaskedSum:
        launch_aggregate<T, AggMode::kMaskedSum>(p, s);
        break;
    }
  });
}

void edge_grad_cuda(const EdgeGradParams& p, void* stream) {
  constexpr int kThreads = 256;
  const int64_t blocks = (p.num_edges * 32 + kThreads - 1) / kThreads;
  if (blocks == 0) return;
  dispatch_cuda_dtype(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    edge_grad_kernel<T>
        <<<grid_size(blocks, "edge_grad_kernel"), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
            p);
    GALFAST_CHECK_LAUNCH("edge_grad_kernel");
  });
}

}  // namespace galfast
