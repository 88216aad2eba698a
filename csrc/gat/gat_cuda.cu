// CUDA fused GAT.
// Thread mapping: every kernel runs one warp per (node, head) pair, warp w -> node w / H,
// head w % H. In the forward kernel (CSR row of destination i) and the backward transpose
// kernel (CSC column of source j), lane l owns features l + 32 v (v < kVec) of a 128-wide
// feature tile in registers while the warp walks the node's edge list once per tile; every
// lane evaluates the (identical) logit of each edge, so the forward needs no shuffles, and the
// backward's per-edge dot products are warp shuffle reductions. The delta kernel reduces one
// row's features, the destination-gradient kernel one row's parked dz_e (lanes stride edges).
// Each output element is produced by one warp in a fixed order: deterministic, no atomics.
// Very high-degree rows are walked by one warp like any other (no hub path): the attention
// work per edge is small and the many light rows keep the device busy.
#include <cstdint>

#include "common/cuda_check.h"
#include "common/cuda_types.cuh"
#include "gat/gat.h"
#include "gat/gat_dropout.h"
#include "gat/gat_row.h"

namespace galfast {
namespace {

constexpr int kVec = 4;
constexpr int kTile = 32 * kVec;
constexpr int kThreads = 256;

// Feature tiles a warp walks its edge list for; at least one, so lse and the logit gradients
// exist even when there are no features.
__host__ __device__ __forceinline__ int64_t num_tiles(int64_t F) {
  return F > 0 ? (F + kTile - 1) / kTile : 1;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ double warp_sum(double v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

template <typename T>
__global__ void gat_forward_kernel(GatParams p, AttentionDropout drop) {
  using Acc = acc_t<T>;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  const int64_t H = p.heads, F = p.features;
  const int64_t i = warp / H, k = warp % H;
  if (i >= p.num_rows) return;  // warp-uniform
  const T* h = static_cast<const T*>(p.h);
  const T* a_src = static_cast<const T*>(p.alpha_src);
  const Acc a_dst = to_acc(static_cast<const T*>(p.alpha_dst)[i * H + k]);
  const Acc slope = static_cast<Acc>(p.negative_slope);
  const int64_t begin = p.rowptr[i], end = p.rowptr[i + 1];
  T* out = static_cast<T*>(p.out) + (i * H + k) * F;
  for (int64_t tile = 0; tile < num_tiles(F); ++tile) {
    const int64_t f0 = tile * kTile;
    OnlineSoftmax<Acc> softmax;
    Acc acc[kVec];
#pragma unroll
    for (int v = 0; v < kVec; ++v) acc[v] = Acc(0);
    for (int64_t e = begin; e < end; ++e) {
      const int64_t j = p.col[e];
      Acc weight;
      const Acc rescale = softmax.push(leaky_relu(to_acc(a_src[j * H + k]) + a_dst, slope), weight);
      weight *= drop.keep<Acc>(e, k);
      const T* hj = h + (j * H + k) * F;
#pragma unroll
      for (int v = 0; v < kVec; ++v) {
        const int64_t f = f0 + lane + 32 * v;
        if (f < F) acc[v] = acc[v] * rescale + weight * to_acc(hj[f]);
      }
    }
    const Acc inv = softmax.inv_sum();
#pragma unroll
    for (int v = 0; v < kVec; ++v) {
      const int64_t f = f0 + lane + 32 * v;
      if (f < F) out[f] = from_acc<T>(acc[v] * inv);
    }
    if (tile == 0 && lane == 0) static_cast<Acc*>(p.lse)[i * H + k] = softmax.lse();
  }
}

// <a[0:F], b[0:F]> over the warp (every lane gets the total).
template <typename T>
__device__ __forceinline__ acc_t<T> warp_dot(const T* a, const T* b, int64_t F, int lane) {
  acc_t<T> s = 0;
  for (int64_t f = lane; f < F; f += 32) s += to_acc(a[f]) * to_acc(b[f]);
  return warp_sum(s);
}

// delta[i, k] = <grad_out[i, k], out[i, k]>.
template <typename T>
__global__ void gat_backward_delta_kernel(GatBackwardParams p) {
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  const int64_t ik = warp, F = p.features;
  if (ik >= p.num_rows * p.heads) return;  // warp-uniform
  const acc_t<T> delta = warp_dot(static_cast<const T*>(p.grad_out) + ik * F,
                                  static_cast<const T*>(p.out) + ik * F, F, lane);
  if (lane == 0) static_cast<acc_t<T>*>(p.delta)[ik] = delta;
}

// Source side, over the transpose: grad_h[j, k, :], grad_alpha_src[j, k], and dz_e parked in
// edge_grad at each edge's CSR position.
template <typename T>
__global__ void gat_backward_col_kernel(GatBackwardParams p, AttentionDropout drop) {
  using Acc = acc_t<T>;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  const int64_t H = p.heads, F = p.features;
  const int64_t j = warp / H, k = warp % H;
  if (j >= p.num_cols) return;  // warp-uniform
  const int64_t jk = j * H + k;
  const T* hj = static_cast<const T*>(p.h) + jk * F;
  const T* grad_out = static_cast<const T*>(p.grad_out);
  const T* a_dst = static_cast<const T*>(p.alpha_dst);
  const Acc* lse = static_cast<const Acc*>(p.lse);
  const Acc* delta = static_cast<const Acc*>(p.delta);
  Acc* edge_grad = static_cast<Acc*>(p.edge_grad);
  const Acc a_src = to_acc(static_cast<const T*>(p.alpha_src)[jk]);
  const Acc slope = static_cast<Acc>(p.negative_slope);
  T* grad_h = static_cast<T*>(p.grad_h) + jk * F;
  Acc grad_src = Acc(0);
  for (int64_t tile = 0; tile < num_tiles(F); ++tile) {
    const int64_t f0 = tile * kTile;
    Acc hv[kVec], acc[kVec];
#pragma unroll
    for (int v = 0; v < kVec; ++v) {
      const int64_t f = f0 + lane + 32 * v;
      hv[v] = f < F ? to_acc(hj[f]) : Acc(0);
      acc[v] = Acc(0);
    }
    for (int64_t s = p.colptr[j]; s < p.colptr[j + 1]; ++s) {
      const int64_t i = p.csc_row[s], ik = i * H + k, e = p.csc_edge_id[s];
      const EdgeAttention<Acc> att = recompute_attention(a_src, to_acc(a_dst[ik]), lse[ik], slope);
      const Acc keep = drop.keep<Acc>(e, k);
      const Acc weight = keep * att.prob;
      const T* go = grad_out + ik * F;
      Acc g = Acc(0);
#pragma unroll
      for (int v = 0; v < kVec; ++v) {
        const int64_t f = f0 + lane + 32 * v;
        if (f < F) {
          const Acc gv = to_acc(go[f]);
          g += gv * hv[v];
          acc[v] += weight * gv;
        }
      }
      g = warp_sum(g);
      // dz_e needs the whole dot product: each tile adds its part (the delta term comes
      // with the first), in tile order, always from lane 0.
      const Acc dz = logit_grad(att, keep, g, tile == 0 ? delta[ik] : Acc(0));
      grad_src += dz;
      if (lane == 0) edge_grad[e * H + k] = tile == 0 ? dz : edge_grad[e * H + k] + dz;
    }
#pragma unroll
    for (int v = 0; v < kVec; ++v) {
      const int64_t f = f0 + lane + 32 * v;
      if (f < F) grad_h[f] = from_acc<T>(acc[v]);
    }
  }
  if (lane == 0) static_cast<T*>(p.grad_alpha_src)[jk] = from_acc<T>(grad_src);
}

// grad_alpha_dst[i, k] = sum of the row's dz_e: lanes stride the row, then a fixed shuffle
// tree (deterministic).
template <typename T>
__global__ void gat_backward_dst_kernel(GatBackwardParams p) {
  using Acc = acc_t<T>;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  const int64_t H = p.heads;
  const int64_t i = warp / H, k = warp % H;
  if (i >= p.num_rows) return;  // warp-uniform
  const Acc* edge_grad = static_cast<const Acc*>(p.edge_grad);
  Acc sum = Acc(0);
  for (int64_t e = p.rowptr[i] + lane; e < p.rowptr[i + 1]; e += 32) sum += edge_grad[e * H + k];
  sum = warp_sum(sum);
  if (lane == 0) static_cast<T*>(p.grad_alpha_dst)[i * H + k] = from_acc<T>(sum);
}

int64_t num_blocks(int64_t nodes, int64_t heads) {
  return (nodes * heads * 32 + kThreads - 1) / kThreads;
}

}  // namespace

void gat_forward_cuda(const GatParams& p, void* stream) {
  const int64_t blocks = num_blocks(p.num_rows, p.heads);
  if (blocks == 0) return;
  const AttentionDropout drop(p.dropout, p.seed);
  dispatch_cuda_dtype(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    gat_forward_kernel<T>
        <<<static_cast<unsigned>(blocks), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(p,
                                                                                            drop);
    GALFAST_CHECK_LAUNCH("gat_forward_kernel");
  });
}

void gat_backward_cuda(const GatBackwardParams& p, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  const AttentionDropout drop(p.dropout, p.seed);
  const int64_t row_blocks = num_blocks(p.num_rows, p.heads);
  const int64_t col_blocks = num_blocks(p.num_cols, p.heads);
  dispatch_cuda_dtype(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    // Same stream, so each kernel sees what the one before wrote (delta, then edge_grad).
    if (row_blocks > 0) {
      gat_backward_delta_kernel<T><<<static_cast<unsigned>(row_blocks), kThreads, 0, s>>>(p);
      GALFAST_CHECK_LAUNCH("gat_backward_delta_kernel");
    }
    if (col_blocks > 0) {
      gat_backward_col_kernel<T><<<static_cast<unsigned>(col_blocks), kThreads, 0, s>>>(p, drop);
      GALFAST_CHECK_LAUNCH("gat_backward_col_kernel");
    }
    if (row_blocks > 0) {
      gat_backward_dst_kernel<T><<<static_cast<unsigned>(row_blocks), kThreads, 0, s>>>(p);
      GALFAST_CHECK_LAUNCH("gat_backward_dst_kernel");
    }
  });
}

}  // namespace galfast
