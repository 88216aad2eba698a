// CUDA NNConv kernels.
// Forward thread mapping: one block per destination row. The block stages up to `chunk` of
// the row's edges in shared memory (w_e h_e and x_u, in the accumulation type), then thread t
// owns the entries t, t + blockDim, ... of the row's K x F block of S (and of A) and adds the
// staged edges to them in edge order; consecutive threads take consecutive features, so the
// stores are coalesced and each warp reads one broadcast h value per edge.
// Edge-gradient thread mapping: one block per destination row, taking its edges in order.
// Per edge, warp w computes grad_h[e, k] for k = w, w + warps, ... (lanes stride the features,
// then a shuffle reduction) and thread t computes edge_grad_x[e, f] for f = t, t + blockDim.
// grad_x thread mapping: one thread per (source, feature), summing the source's CSC slots in
// order. No kernel uses atomics, so every result is deterministic.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/cuda_check.h"
#include "common/cuda_types.cuh"
#include "nnconv/nnconv.h"
#include "nnconv/nnconv_row.h"

namespace galfast {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxChunk = 32;
constexpr int64_t kSharedBytes = 32 * 1024;

template <typename T>
__global__ void nnconv_forward_kernel(NnconvParams p, int chunk) {
  using Acc = acc_t<T>;
  extern __shared__ unsigned char shared[];
  const int64_t K = p.hidden, F = p.features, r = blockIdx.x;
  Acc* hs = reinterpret_cast<Acc*>(shared);  // [chunk, K], times w
  Acc* xs = hs + chunk * K;                  // [chunk, F]
  const T* h = static_cast<const T*>(p.h);
  const T* x = static_cast<const T*>(p.x);
  T* s = static_cast<T*>(p.s) + r * K * F;
  T* a = static_cast<T*>(p.a) + r * F;
  const Acc w = nnconv_row_factor<Acc>(p.row_scale, r);
  const int64_t begin = p.rowptr[r], end = p.rowptr[r + 1];
  // One pass even for an empty row, which writes its zeros.
  for (int64_t e0 = begin; e0 == begin || e0 < end; e0 += chunk) {
    const int64_t n = end - e0 < chunk ? end - e0 : chunk;
    __syncthreads();  // the previous chunk is consumed
    for (int64_t i = threadIdx.x; i < n * K; i += blockDim.x) hs[i] = w * to_acc(h[e0 * K + i]);
    for (int64_t i = threadIdx.x; i < n * F; i += blockDim.x) {
      xs[i] = to_acc(x[p.col[e0 + i / F] * F + i % F]);
    }
    __syncthreads();
    const bool first = e0 == begin;
    for (int64_t idx = threadIdx.x; idx < K * F; idx += blockDim.x) {
      const int64_t k = idx / F, f = idx % F;
      Acc v = first ? Acc(0) : to_acc(s[idx]);
      for (int64_t j = 0; j < n; ++j) v += hs[j * K + k] * xs[j * F + f];
      s[idx] = from_acc<T>(v);
    }
    for (int64_t f = threadIdx.x; f < F; f += blockDim.x) {
      Acc v = first ? Acc(0) : to_acc(a[f]);
      for (int64_t j = 0; j < n; ++j) v += w * xs[j * F + f];
      a[f] = from_acc<T>(v);
    }
  }
}

template <typename T>
__global__ void nnconv_edge_grad_kernel(NnconvEdgeGradParams p) {
  using Acc = acc_t<T>;
  extern __shared__ unsigned char shared[];
  const int64_t K = p.hidden, F = p.features, r = blockIdx.x;
  Acc* hs = reinterpret_cast<Acc*>(shared);  // [K]
  Acc* xs = hs + K;                          // [F]
  const T* h = static_cast<const T*>(p.h);
  const T* x = static_cast<const T*>(p.x);
  const T* gs = static_cast<const T*>(p.grad_s) + r * K * F;
  const T* ga = p.grad_a ? static_cast<const T*>(p.grad_a) + r * F : nullptr;
  T* grad_h = static_cast<T*>(p.grad_h);
  T* egx = static_cast<T*>(p.edge_grad_x);
  const Acc w = nnconv_row_factor<Acc>(p.row_scale, r);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  for (int64_t e = p.rowptr[r]; e < p.rowptr[r + 1]; ++e) {
    __syncthreads();  // the previous edge is consumed
    for (int64_t k = threadIdx.x; k < K; k += blockDim.x) hs[k] = to_acc(h[e * K + k]);
    for (int64_t f = threadIdx.x; f < F; f += blockDim.x) xs[f] = to_acc(x[p.col[e] * F + f]);
    __syncthreads();
    for (int64_t k = warp; k < K; k += warps) {  // k is uniform across a warp
      Acc d = strided_dot<Acc>(gs + k * F, xs, F, lane, 32);
      for (int offset = 16; offset > 0; offset /= 2) d += __shfl_xor_sync(0xffffffffu, d, offset);
      if (lane == 0) grad_h[e * K + k] = from_acc<T>(w * d);
    }
    for (int64_t f = threadIdx.x; f < F; f += blockDim.x) {
      Acc v = ga ? to_acc(ga[f]) : Acc(0);
      for (int64_t k = 0; k < K; ++k) v += to_acc(gs[k * F + f]) * hs[k];
      egx[e * F + f] = from_acc<T>(w * v);
    }
  }
}

template <typename T>
__global__ void nnconv_grad_x_kernel(NnconvGradXParams p) {
  using Acc = acc_t<T>;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t F = p.features;
  if (idx >= p.num_cols * F) return;
  const int64_t u = idx / F, f = idx % F;
  const T* egx = static_cast<const T*>(p.edge_grad_x);
  Acc sum = Acc(0);
  for (int64_t s = p.colptr[u]; s < p.colptr[u + 1]; ++s)
    sum += to_acc(egx[p.csc_edge_id[s] * F + f]);
  static_cast<T*>(p.grad_x)[idx] = from_acc<T>(sum);
}

// Bytes of shared memory for `edges` staged edges, refused past what a block can have.
template <typename Acc>
int64_t staged_bytes(int64_t edges, const NnconvParams& p) {
  return edges * (p.hidden + p.features) * static_cast<int64_t>(sizeof(Acc));
}

}  // namespace

void nnconv_forward_cuda(const NnconvParams& p, void* stream) {
  if (p.num_rows == 0 || p.features == 0) return;
  dispatch_cuda_dtype(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    using Acc = acc_t<T>;
    const int64_t per_edge = staged_bytes<Acc>(1, p);
    if (per_edge > kSharedBytes) {
      throw std::invalid_argument(
          "nnconv_aggregate on CUDA: hidden + features = " + std::to_string(p.hidden + p.features) +
          " is too large to stage one edge in shared memory");
    }
    const int chunk = static_cast<int>(std::min<int64_t>(kSharedBytes / per_edge, kMaxChunk));
    nnconv_forward_kernel<T>
        <<<grid_size(p.num_rows, "nnconv_forward_kernel"), kThreads,
           static_cast<size_t>(staged_bytes<Acc>(chunk, p)), static_cast<cudaStream_t>(stream)>>>(
            p, chunk);
    GALFAST_CHECK_LAUNCH("nnconv_forward_kernel");
  });
}

void nnconv_edge_grad_cuda(const NnconvEdgeGradParams& p, void* stream) {
  if (p.num_rows == 0 || p.num_edges == 0) return;
  dispatch_cuda_dtype(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    const int64_t bytes = (p.hidden + p.features) * static_cast<int64_t>(sizeof(acc_t<T>));
    if (bytes > kSharedBytes) {
      throw std::invalid_argument("nnconv_aggregate backward on CUDA: hidden + features = " +
                                  std::to_string(p.hidden + p.features) + " is too large");
    }
    nnconv_edge_grad_kernel<T>
        <<<grid_size(p.num_rows, "nnconv_edge_grad_kernel"), kThreads, static_cast<size_t>(bytes),
           static_cast<cudaStream_t>(stream)>>>(p);
    GALFAST_CHECK_LAUNCH("nnconv_edge_grad_kernel");
  });
}

void nnconv_grad_x_cuda(const NnconvGradXParams& p, void* stream) {
  const int64_t blocks = (p.num_cols * p.features + kThreads - 1) / kThreads;
  if (blocks == 0) return;
  dispatch_cuda_dtype(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    nnconv_grad_x_kernel<T><<<grid_size(blocks, "nnconv_grad_x_kernel"), kThreads, 0,
                              static_cast<cudaStream_t>(stream)>>>(p);
    GALFAST_CHECK_LAUNCH("nnconv_grad_x_kernel");
  });
}

}  // namespace galfast
