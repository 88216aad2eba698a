// CUDA fused GAT.
// Thread mapping: every kernel gives each (node, head) pair a group of G lanes, G = 8, 16 or
// 32 (the smallest covering the head's features, up to 32), so small heads (GAT's classic
// 8 x 8) do not leave most of a warp idle; pair p -> node p / H, head p % H. Groups are aligned
// inside warps and shuffle only among their own lanes, so neighbouring groups may walk edge
// lists of different lengths. In the forward kernel (CSR row of destination i) and the
// backward transpose kernel (CSC column of source j), lane l of a group owns features
// l + G v (v < kVec) of a (G kVec)-wide feature tile in registers while the group walks the
// node's edges once per tile; every lane evaluates the (identical) logit of each edge, so the
// forward needs no shuffles, and the backward's per-edge dot products are group shuffle
// reductions. The delta kernel reduces one row's features, the destination-gradient kernel
// one row's parked dz_e (lanes stride the edges). Each output element is produced by one group
// in a fixed order: deterministic, no atomics. Very high-degree rows are walked by one group
// like any other (no hub path): the attention work per edge is small and the many light rows
// keep the device busy.
#include <cstdint>

#include "common/cuda_check.h"
#include "common/cuda_types.cuh"
#include "gat/gat.h"
#include "gat/gat_dropout.h"
#include "gat/gat_row.h"

namespace galfast {
namespace {

constexpr int kVec = 4;
constexpr int kThreads = 256;

int group_size(int64_t features) { return features > 16 ? 32 : (features > 8 ? 16 : 8); }

// The lanes that own one (node, head) pair.
struct LaneGroup {
  int64_t pair;   // node * H + head
  int lane;       // 0 .. size - 1
  int size;       // 8, 16 or 32; divides 32, so a group never straddles warps
  unsigned mask;  // the group's lanes within its warp

  // Feature tiles the group walks its edge list for; at least one, so lse and the logit
  // gradients exist even when there are no features.
  __device__ int64_t num_tiles(int64_t F) const {
    const int64_t tile = static_cast<int64_t>(size) * kVec;
    return F > 0 ? (F + tile - 1) / tile : 1;
  }

  // Feature owned by this lane in slot v of tile t.
  __device__ int64_t feature(int64_t t, int v) const { return (t * kVec + v) * size + lane; }
};

__device__ __forceinline__ LaneGroup lane_group(int size) {
  const int64_t thread = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int warp_lane = static_cast<int>(threadIdx.x % 32);
  const int base = warp_lane / size * size;
  const unsigned mask = size == 32 ? 0xffffffffu : ((1u << size) - 1u) << base;
  return {thread / size, warp_lane - base, size, mask};
}

// Sum over the group's lanes (every lane gets the total; a fixed tree: deterministic).
template <typename Acc>
__device__ __forceinline__ Acc group_sum(Acc v, const LaneGroup& g) {
  for (int offset = g.size / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(g.mask, v, offset);
  return v;
}

// <a[0:F], b[0:F]> over the group.
template <typename T>
__device__ __forceinline__ acc_t<T> group_dot(const T* a, const T* b, int64_t F,
                                              const LaneGroup& g) {
  acc_t<T> s = 0;
  for (int64_t f = g.lane; f < F; f += g.size) s += to_acc(a[f]) * to_acc(b[f]);
  return group_sum(s, g);
}

template <typename T>
__global__ void gat_forward_kernel(GatParams p, AttentionDropout drop, int size) {
  using Acc = acc_t<T>;
  const LaneGroup g = lane_group(size);
  const int64_t H = p.heads, F = p.features;
  const int64_t i = g.pair / H, k = g.pair % H;
  if (i >= p.num_rows) return;  // group-uniform
  const T* h = static_cast<const T*>(p.h);
  const T* a_src = static_cast<const T*>(p.alpha_src);
  const T* a_edge = static_cast<const T*>(p.alpha_edge);  // null: no edge term
  const Acc a_dst = to_acc(static_cast<const T*>(p.alpha_dst)[g.pair]);
  const Acc slope = static_cast<Acc>(p.negative_slope);
  const int64_t begin = p.rowptr[i], end = p.rowptr[i + 1];
  T* out = static_cast<T*>(p.out) + g.pair * F;
  for (int64_t tile = 0; tile < g.num_tiles(F); ++tile) {
    OnlineSoftmax<Acc> softmax;
    Acc acc[kVec];
#pragma unroll
    for (int v = 0; v < kVec; ++v) acc[v] = Acc(0);
    for (int64_t e = begin; e < end; ++e) {
      const int64_t j = p.col[e];
      Acc weight;
      const Acc a_e = a_edge ? to_acc(a_edge[e * H + k]) : Acc(0);
      const Acc rescale =
          softmax.push(leaky_relu(to_acc(a_src[j * H + k]) + a_dst + a_e, slope), weight);
      weight *= drop.keep<Acc>(e, k);
      const T* hj = h + (j * H + k) * F;
#pragma unroll
      for (int v = 0; v < kVec; ++v) {
        const int64_t f = g.feature(tile, v);
        if (f < F) acc[v] = acc[v] * rescale + weight * to_acc(hj[f]);
      }
    }
    const Acc inv = softmax.inv_sum();
#pragma unroll
    for (int v = 0; v < kVec; ++v) {
      const int64_t f = g.feature(tile, v);
      if (f < F) out[f] = from_acc<T>(acc[v] * inv);
    }
    if (tile == 0 && g.lane == 0) static_cast<Acc*>(p.lse)[g.pair] = softmax.lse();
  }
}

// delta[i, k] = <grad_out[i, k], out[i, k]>.
template <typename T>
__global__ void gat_backward_delta_kernel(GatBackwardParams p, int size) {
  const LaneGroup g = lane_group(size);
  const int64_t F = p.features;
  if (g.pair >= p.num_rows * p.heads) return;  // group-uniform
  const acc_t<T> delta = group_dot(static_cast<const T*>(p.grad_out) + g.pair * F,
                                   static_cast<const T*>(p.out) + g.pair * F, F, g);
  if (g.lane == 0) static_cast<acc_t<T>*>(p.delta)[g.pair] = delta;
}

// Source side, over the transpose: grad_h[j, k, :], grad_alpha_src[j, k], and dz_e parked in
// edge_grad at each edge's CSC slot s.
template <typename T>
__global__ void gat_backward_col_kernel(GatBackwardParams p, AttentionDropout drop, int size) {
  using Acc = acc_t<T>;
  const LaneGroup g = lane_group(size);
  const int64_t H = p.heads, F = p.features;
  const int64_t j = g.pair / H, k = g.pair % H;
  if (j >= p.num_cols) return;  // group-uniform
  const T* hj = static_cast<const T*>(p.h) + g.pair * F;
  const T* grad_out = static_cast<const T*>(p.grad_out);
  const T* a_dst = static_cast<const T*>(p.alpha_dst);
  const T* a_edge = static_cast<const T*>(p.alpha_edge);  // null: no edge term
  const Acc* lse = static_cast<const Acc*>(p.lse);
  const Acc* delta = static_cast<const Acc*>(p.delta);
  Acc* edge_grad = static_cast<Acc*>(p.edge_grad);
  const Acc a_src = to_acc(static_cast<const T*>(p.alpha_src)[g.pair]);
  const Acc slope = static_cast<Acc>(p.negative_slope);
  T* grad_h = static_cast<T*>(p.grad_h) + g.pair * F;
  Acc grad_src = Acc(0);
  for (int64_t tile = 0; tile < g.num_tiles(F); ++tile) {
    Acc hv[kVec], acc[kVec];
#pragma unroll
    for (int v = 0; v < kVec; ++v) {
      const int64_t f = g.feature(tile, v);
      hv[v] = f < F ? to_acc(hj[f]) : Acc(0);
      acc[v] = Acc(0);
    }
    for (int64_t s = p.colptr[j]; s < p.colptr[j + 1]; ++s) {
      const int64_t i = p.csc_row[s], ik = i * H + k, e = p.csc_edge_id[s];
      const Acc a_e = a_edge ? to_acc(a_edge[e * H + k]) : Acc(0);
      const EdgeAttention<Acc> att =
          recompute_attention(a_src, to_acc(a_dst[ik]), a_e, lse[ik], slope);
      const Acc keep = drop.keep<Acc>(e, k);
      const Acc weight = keep * att.prob;
      const T* go = grad_out + ik * F;
      Acc dot = Acc(0);
#pragma unroll
      for (int v = 0; v < kVec; ++v) {
        const int64_t f = g.feature(tile, v);
        if (f < F) {
          const Acc gv = to_acc(go[f]);
          dot += gv * hv[v];
          acc[v] += weight * gv;
        }
      }
      dot = group_sum(dot, g);
      // dz_e needs the whole dot product: each tile adds its part (the delta term comes
      // with the first), in tile order, always from lane 0.
      const Acc dz = logit_grad(att, keep, dot, tile == 0 ? delta[ik] : Acc(0));
      grad_src += dz;
      if (g.lane == 0) edge_grad[s * H + k] = tile == 0 ? dz : edge_grad[s * H + k] + dz;
    }
#pragma unroll
    for (int v = 0; v < kVec; ++v) {
      const int64_t f = g.feature(tile, v);
      if (f < F) grad_h[f] = from_acc<T>(acc[v]);
    }
  }
  if (g.lane == 0) static_cast<T*>(p.grad_alpha_src)[g.pair] = from_acc<T>(grad_src);
}

// grad_alpha_dst[i, k] = sum of the row's dz_e (read at their CSC slots): lanes stride the
// row, then a group reduction; each dz_e is also copied out in CSR order as grad_alpha_edge.
template <typename T>
__global__ void gat_backward_dst_kernel(GatBackwardParams p, int size) {
  using Acc = acc_t<T>;
  const LaneGroup g = lane_group(size);
  const int64_t H = p.heads;
  const int64_t i = g.pair / H, k = g.pair % H;
  if (i >= p.num_rows) return;  // group-uniform
  const Acc* edge_grad = static_cast<const Acc*>(p.edge_grad);
  Acc* grad_edge = static_cast<Acc*>(p.grad_alpha_edge);
  Acc sum = Acc(0);
  for (int64_t e = p.rowptr[i] + g.lane; e < p.rowptr[i + 1]; e += g.size) {
    const Acc dz = edge_grad[p.csr_to_csc[e] * H + k];
    sum += dz;
    if (grad_edge) grad_edge[e * H + k] = dz;
  }
  sum = group_sum(sum, g);
  if (g.lane == 0) static_cast<T*>(p.grad_alpha_dst)[g.pair] = from_acc<T>(sum);
}

unsigned num_blocks(int64_t nodes, int64_t heads, int size) {
  return grid_size((nodes * heads * size + kThreads - 1) / kThreads, "gat_aggregate");
}

}  // namespace

void gat_forward_cuda(const GatParams& p, void* stream) {
  const int size = group_size(p.features);
  const unsigned blocks = num_blocks(p.num_rows, p.heads, size);
  if (blocks == 0) return;
  const AttentionDropout drop(p.dropout, p.seed);
  const auto s = static_cast<cudaStream_t>(stream);
  dispatch_cuda_dtype(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    gat_forward_kernel<T><<<blocks, kThreads, 0, s>>>(p, drop, size);
    GALFAST_CHECK_LAUNCH("gat_forward_kernel");
  });
}

void gat_backward_cuda(const GatBackwardParams& p, void* stream) {
  const int size = group_size(p.features);
  const unsigned row_blocks = num_blocks(p.num_rows, p.heads, size);
  const unsigned col_blocks = num_blocks(p.num_cols, p.heads, size);
  const AttentionDropout drop(p.dropout, p.seed);
  const auto s = static_cast<cudaStream_t>(stream);
  dispatch_cuda_dtype(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    // Same stream, so each kernel sees what the one before wrote (delta, then edge_grad).
    if (row_blocks > 0) {
      gat_backward_delta_kernel<T><<<row_blocks, kThreads, 0, s>>>(p, size);
      GALFAST_CHECK_LAUNCH("gat_backward_delta_kernel");
    }
    if (col_blocks > 0) {
      gat_backward_col_kernel<T><<<col_blocks, kThreads, 0, s>>>(p, drop, size);
      GALFAST_CHECK_LAUNCH("gat_backward_col_kernel");
    }
    if (row_blocks > 0) {
      gat_backward_dst_kernel<T><<<row_blocks, kThreads, 0, s>>>(p, size);
      GALFAST_CHECK_LAUNCH("gat_backward_dst_kernel");
    }
  });
}

}  // namespace galfast
