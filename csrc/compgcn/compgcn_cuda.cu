// CUDA CompGCN kernels.
// Row kernel thread mapping: one warp per destination row (per source node on the transpose);
// lane l owns the units (features, or (re, im) pairs for kCorr) u0 + l + 32 k, k < kVec, so the
// gathers of x and rel rows are coalesced; larger F loops over tiles of 32 kVec units. The warp
// walks its row in chunks of 32 edges: lane j loads edge j's source, relation and factor (one
// coalesced load), then the warp takes the chunk's edges in order from registers by shuffle, so
// every output element is summed in CSR order (deterministic, no atomics).
// Relation-gradient thread mapping: one warp per chunk of a relation's edges, mapped as the row
// kernel, writes the chunk's partial sum; then one thread per (relation, feature) adds its
// relation's partials in chunk order (deterministic, no atomics).
#include <cstdint>

#include "common/cuda_check.h"
#include "common/cuda_types.cuh"
#include "compgcn/compgcn.h"
#include "compgcn/compgcn_row.h"

namespace galfast {
namespace {

constexpr int kVec = 4;
constexpr int kThreads = 256;

// Values per unit: a (re, im) pair for kCorr, one feature otherwise.
template <Composition kOp>
constexpr int kUnit = kOp == Composition::kCorr ? 2 : 1;

template <typename Acc>
struct EdgeView {
  int64_t a_row;  // row gathered from the first operand (x, or grad_out)
  int64_t b_row;  // row gathered from the second (rel, or x for the relation gradient)
  Acc w;
};

template <typename T>
__device__ __forceinline__ acc_t<T> load(const void* base, int64_t at) {
  return to_acc(static_cast<const T*>(base)[at]);
}

// Lane `src`'s edge view, for every lane of the warp.
template <typename Acc>
__device__ __forceinline__ EdgeView<Acc> shuffle_edge(const EdgeView<Acc>& ev, int src) {
  return {__shfl_sync(0xffffffffu, ev.a_row, src), __shfl_sync(0xffffffffu, ev.b_row, src),
          __shfl_sync(0xffffffffu, ev.w, src)};
}

// acc[k] += w * phi(a[row_a, unit], b[row_b, unit]) for this lane's units (forward and the
// x-gradient).
template <typename T, Composition kOp>
__device__ __forceinline__ void compose_units(const CompgcnParams& p, const EdgeView<acc_t<T>>& ev,
                                              int64_t u0, int lane, acc_t<T> (&acc)[kVec][2]) {
  constexpr int kU = kUnit<kOp>;
  const int64_t F = p.num_features, units = F / kU;
#pragma unroll
  for (int k = 0; k < kVec; ++k) {
    const int64_t u = u0 + lane + 32 * k;
    if (u >= units) continue;
    const int64_t at_a = ev.a_row * F + u * kU, at_b = ev.b_row * F + u * kU;
    if constexpr (kOp == Composition::kCorr) {
      conj_mul_add(ev.w, load<T>(p.x, at_a), load<T>(p.x, at_a + 1), load<T>(p.rel, at_b),
                   load<T>(p.rel, at_b + 1), acc[k][0], acc[k][1]);
    } else if constexpr (kOp == Composition::kSource) {
      acc[k][0] += ev.w * load<T>(p.x, at_a);
    } else {
      acc[k][0] += ev.w * compose<kOp>(load<T>(p.x, at_a), load<T>(p.rel, at_b));
    }
  }
}

template <typename T, Composition kOp>
__global__ void compgcn_rows_kernel(CompgcnParams p) {
  using Acc = acc_t<T>;
  constexpr int kU = kUnit<kOp>;
  const int64_t r = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (r >= p.num_rows) return;  // r is uniform across a warp: whole warps leave together
  const int64_t begin = p.rowptr[r], end = p.rowptr[r + 1], F = p.num_features;
  for (int64_t u0 = 0; u0 < F / kU; u0 += 32 * kVec) {
    Acc acc[kVec][2] = {};
    for (int64_t e0 = begin; e0 < end; e0 += 32) {
      EdgeView<Acc> mine{0, 0, Acc(0)};
      const int64_t e = e0 + lane;
      if (e < end) {
        const int64_t c = p.col[e];
        mine = {c, kOp == Composition::kSource ? int64_t(0) : p.edge_type[e],
                compgcn_factor<T, Acc>(p.row_scale, p.col_scale, p.weight, r, c, e)};
      }
      const int n = end - e0 < 32 ? static_cast<int>(end - e0) : 32;
      for (int j = 0; j < n; ++j) compose_units<T, kOp>(p, shuffle_edge(mine, j), u0, lane, acc);
    }
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const int64_t u = u0 + lane + 32 * k;
      if (u >= F / kU) continue;
#pragma unroll
      for (int i = 0; i < kU; ++i) {
        static_cast<T*>(p.out)[r * F + u * kU + i] = from_acc<T>(acc[k][i]);
      }
    }
  }
}

// acc[k] += w * psi(g[row], x[col]) for this lane's units.
template <typename T, Composition kOp>
__device__ __forceinline__ void rel_units(const RelGradParams& p, const EdgeView<acc_t<T>>& ev,
                                          int64_t u0, int lane, acc_t<T> (&acc)[kVec][2]) {
  constexpr int kU = kUnit<kOp>;
  const int64_t F = p.num_features, units = F / kU;
#pragma unroll
  for (int k = 0; k < kVec; ++k) {
    const int64_t u = u0 + lane + 32 * k;
    if (u >= units) continue;
    const int64_t at_g = ev.a_row * F + u * kU, at_x = ev.b_row * F + u * kU;
    if constexpr (kOp == Composition::kCorr) {
      mul_add(ev.w, load<T>(p.grad_out, at_g), load<T>(p.grad_out, at_g + 1), load<T>(p.x, at_x),
              load<T>(p.x, at_x + 1), acc[k][0], acc[k][1]);
    } else if constexpr (kOp == Composition::kSub) {
      acc[k][0] -= ev.w * load<T>(p.grad_out, at_g);
    } else {
      acc[k][0] += ev.w * rel_term<kOp>(load<T>(p.grad_out, at_g), load<T>(p.x, at_x));
    }
  }
}

template <typename T, Composition kOp>
__global__ void rel_chunks_kernel(RelGradParams p) {
  using Acc = acc_t<T>;
  constexpr int kU = kUnit<kOp>;
  const int64_t chunk = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (chunk >= p.num_chunks) return;  // uniform across a warp
  const int64_t begin = p.chunkptr[chunk], end = p.chunkptr[chunk + 1], F = p.num_features;
  for (int64_t u0 = 0; u0 < F / kU; u0 += 32 * kVec) {
    Acc acc[kVec][2] = {};
    for (int64_t e0 = begin; e0 < end; e0 += 32) {
      EdgeView<Acc> mine{0, 0, Acc(0)};
      const int64_t e = e0 + lane;
      if (e < end) {
        const int64_t r = p.row[e], c = p.col[e];
        mine = {r, c, compgcn_factor<T, Acc>(p.row_scale, p.col_scale, p.weight, r, c, e)};
      }
      const int n = end - e0 < 32 ? static_cast<int>(end - e0) : 32;
      for (int j = 0; j < n; ++j) rel_units<T, kOp>(p, shuffle_edge(mine, j), u0, lane, acc);
    }
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const int64_t u = u0 + lane + 32 * k;
      if (u >= F / kU) continue;
#pragma unroll
      for (int i = 0; i < kU; ++i) static_cast<Acc*>(p.partial)[chunk * F + u * kU + i] = acc[k][i];
    }
  }
}

template <typename T>
__global__ void rel_total_kernel(RelGradParams p) {
  using Acc = acc_t<T>;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.num_rels * p.num_features) return;
  const int64_t t = i / p.num_features, f = i % p.num_features;
  Acc sum = Acc(0);
  for (int64_t k = p.rel_chunkptr[t]; k < p.rel_chunkptr[t + 1]; ++k) {
    sum += static_cast<const Acc*>(p.partial)[k * p.num_features + f];
  }
  static_cast<T*>(p.grad_rel)[i] = from_acc<T>(sum);
}

// Calls fn(std::integral_constant<Composition, op>()) for a runtime composition.
template <typename Fn>
void dispatch_op(Composition op, Fn&& fn) {
  switch (op) {
    case Composition::kSub:
      return fn(std::integral_constant<Composition, Composition::kSub>());
    case Composition::kMult:
      return fn(std::integral_constant<Composition, Composition::kMult>());
    case Composition::kCorr:
      return fn(std::integral_constant<Composition, Composition::kCorr>());
    case Composition::kSource:
      return fn(std::integral_constant<Composition, Composition::kSource>());
  }
}

int64_t warp_blocks(int64_t warps) { return (warps * 32 + kThreads - 1) / kThreads; }

}  // namespace

void compgcn_aggregate_cuda(const CompgcnParams& p, void* stream) {
  const int64_t blocks = warp_blocks(p.num_rows);
  if (blocks == 0 || p.num_features == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  dispatch_cuda_dtype(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    dispatch_op(p.op, [&](auto op) {
      compgcn_rows_kernel<T, decltype(op)::value>
          <<<grid_size(blocks, "compgcn_rows_kernel"), kThreads, 0, s>>>(p);
      GALFAST_CHECK_LAUNCH("compgcn_rows_kernel");
    });
  });
}

void compgcn_rel_grad_cuda(const RelGradParams& p, void* stream) {
  const int64_t total = p.num_rels * p.num_features;
  if (total == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  dispatch_cuda_dtype(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    const int64_t blocks = warp_blocks(p.num_chunks);
    if (blocks > 0) {
      dispatch_op(p.op, [&](auto op) {
        rel_chunks_kernel<T, decltype(op)::value>
            <<<grid_size(blocks, "rel_chunks_kernel"), kThreads, 0, s>>>(p);
        GALFAST_CHECK_LAUNCH("rel_chunks_kernel");
      });
    }
    rel_total_kernel<T>
        <<<grid_size((total + kThreads - 1) / kThreads, "rel_total_kernel"), kThreads, 0, s>>>(p);
    GALFAST_CHECK_LAUNCH("rel_total_kernel");
  });
}

}  // namespace galfast
