// CPU (OpenMP) NNConv kernels, compiled once per instruction set (nnconv_cpu.cpp: baseline,
// nnconv_cpu_avx2.cpp: -mavx2 -mfma) and chosen at run time.
// Thread mapping: rows (for grad_x, source nodes of the CSC) are cut into edge-balanced chunks
// (balanced_row_chunks) handed out dynamically; one thread owns a whole row. For S it takes
// the row's K x F block in register tiles of kRows hidden units by 64 bytes of features and
// streams the row's edges through each tile (their few x rows stay in L1), so every S entry is
// stored once. The backward's row pass reads the row's grad_S block once per edge from L1. Every
// output element is written by one thread in CSR (or CSC) order, so results are bitwise identical
// for any thread count.
#pragma once

#ifndef GALFAST_CPU_ISA
#error "define GALFAST_CPU_ISA before including nnconv_cpu_impl.h"
#endif

#include <algorithm>
#include <cstring>

#include "common/csr_check.h"
#include "common/parallel.h"
#include "common/prefetch.h"
#include "nnconv/nnconv.h"
#include "nnconv/nnconv_row.h"

namespace galfast {
namespace GALFAST_CPU_ISA {
namespace {

// 32 bytes of T as one value (GCC/Clang vector extension): one AVX2 register in the AVX2
// build, two SSE registers in the baseline one. Written out because the compilers' own
// vectorisation of the 2-D register tile below interleaves lanes with shuffles (measured 20x
// slower than this).
template <typename T>
struct VecOf;
template <>
struct VecOf<float> {
  typedef float type __attribute__((vector_size(32)));
};
template <>
struct VecOf<double> {
  typedef double type __attribute__((vector_size(32)));
};
template <typename T>
using Vec = typename VecOf<T>::type;

template <typename T>
[[gnu::always_inline]] inline void load(Vec<T>& v, const T* p) {
  std::memcpy(&v, p, sizeof v);
}

template <typename T>
[[gnu::always_inline]] inline void store(T* p, const Vec<T>& v) {
  std::memcpy(p, &v, sizeof v);
}

template <typename T>
constexpr int kLanes = static_cast<int>(sizeof(Vec<T>) / sizeof(T));

// An S register tile: kRows hidden units by kVecs vectors of features (8 accumulators).
constexpr int kRows = 4;
constexpr int kVecs = 2;

// sk[i * F + f0 : ... + kVecs * lanes] = w * sum over the row's edges of h[e, k + i] x[u, f0 + t]
// for i < kRowsT (sk points at S[r, k]), accumulated in registers and stored once.
template <typename T, int kRowsT>
[[gnu::always_inline]] inline void s_tile(const NnconvParams& p, int64_t r, T w, int64_t k,
                                          int64_t f0, T* __restrict sk) {
  const int64_t K = p.hidden, F = p.features;
  const T* __restrict x = static_cast<const T*>(p.x);
  const T* __restrict h = static_cast<const T*>(p.h);
  Vec<T> acc[kRowsT][kVecs] = {};
  for (int64_t e = p.rowptr[r]; e < p.rowptr[r + 1]; ++e) {
    const T* __restrict xu = x + p.col[e] * F + f0;
    const T* __restrict he = h + e * K + k;
    Vec<T> xv[kVecs];
    for (int j = 0; j < kVecs; ++j) load(xv[j], xu + j * kLanes<T>);
    for (int i = 0; i < kRowsT; ++i) {
      for (int j = 0; j < kVecs; ++j) acc[i][j] += he[i] * xv[j];
    }
  }
  // w is the row's: applied once here rather than per edge.
  for (int i = 0; i < kRowsT; ++i) {
    for (int j = 0; j < kVecs; ++j) store(sk + i * F + f0 + j * kLanes<T>, w * acc[i][j]);
  }
}

// Features [f0, F) of S[r, k] (sk points at it), left over after the register tiles: a plain
// loop.
template <typename T>
inline void s_rest(const NnconvParams& p, int64_t r, T w, int64_t k, int64_t f0, T* __restrict sk) {
  const int64_t K = p.hidden, F = p.features;
  const T* __restrict x = static_cast<const T*>(p.x);
  const T* __restrict h = static_cast<const T*>(p.h);
  std::fill(sk + f0, sk + F, T(0));
  for (int64_t e = p.rowptr[r]; e < p.rowptr[r + 1]; ++e) {
    const T wh = w * h[e * K + k];
    const T* __restrict xu = x + p.col[e] * F;
    for (int64_t f = f0; f < F; ++f) sk[f] += wh * xu[f];
  }
}

// Hidden units [k0, k1) of S[r] into s ([k1 - k0, F], row-major): register tiles over the
// hidden units kRows at a time (then one at a time) and the features kVecs vectors at a time;
// the features left over in a plain loop.
template <typename T>
void s_units(const NnconvParams& p, int64_t r, T w, int64_t k0, int64_t k1, T* __restrict s) {
  constexpr int64_t kWidth = kVecs * kLanes<T>;
  const int64_t F = p.features;
  int64_t f0 = 0;
  for (; f0 + kWidth <= F; f0 += kWidth) {
    int64_t k = k0;
    for (; k + kRows <= k1; k += kRows) s_tile<T, kRows>(p, r, w, k, f0, s + (k - k0) * F);
    for (; k < k1; ++k) s_tile<T, 1>(p, r, w, k, f0, s + (k - k0) * F);
  }
  if (f0 < F) {
    for (int64_t k = k0; k < k1; ++k) s_rest<T>(p, r, w, k, f0, s + (k - k0) * F);
  }
}

// S[r] into s ([K, F]) and A[r] into a ([F]).
template <typename T>
void forward_row(const NnconvParams& p, int64_t r, T* __restrict s, T* __restrict a) {
  const int64_t F = p.features;
  const T* __restrict x = static_cast<const T*>(p.x);
  const T w = nnconv_row_factor<T>(p.row_scale, r);
  std::fill(a, a + F, T(0));
  for (int64_t e = p.rowptr[r]; e < p.rowptr[r + 1]; ++e) {
    const T* __restrict xu = x + p.col[e] * F;
    for (int64_t f = 0; f < F; ++f) a[f] += w * xu[f];
  }
  s_units(p, r, w, 0, p.hidden, s);
}

// sum_f a[f] * b[f] as kVecs vectors of partial sums whose lanes are added in a fixed order:
// vectorised (one running sum is a serial chain the compiler may not reorder) and
// deterministic.
template <typename T>
inline T lane_dot(const T* __restrict a, const T* __restrict b, int64_t n) {
  constexpr int64_t kWidth = kVecs * kLanes<T>;
  Vec<T> part[kVecs] = {};
  int64_t i = 0;
  for (; i + kWidth <= n; i += kWidth) {
    for (int j = 0; j < kVecs; ++j) {
      Vec<T> va, vb;
      load(va, a + i + j * kLanes<T>);
      load(vb, b + i + j * kLanes<T>);
      part[j] += va * vb;
    }
  }
  T lanes[kWidth];
  for (int j = 0; j < kVecs; ++j) store(lanes + j * kLanes<T>, part[j]);
  T sum = T(0);
  for (int64_t l = 0; l < kWidth; ++l) sum += lanes[l];
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// edge_grad_x[e, f0 : f0 + kVecs * lanes] = w (grad_A[v] + sum_k h[e, k] grad_S[v, k]) over
// that tile of features, accumulated in registers.
template <typename T>
[[gnu::always_inline]] inline void edge_grad_x_tile(const T* __restrict gs, const T* __restrict ga,
                                                    const T* __restrict he, int64_t K, int64_t F,
                                                    int64_t f0, T w, T* __restrict gx) {
  Vec<T> acc[kVecs] = {};
  if (ga) {
    for (int j = 0; j < kVecs; ++j) load(acc[j], ga + f0 + j * kLanes<T>);
  }
  for (int64_t k = 0; k < K; ++k) {
    for (int j = 0; j < kVecs; ++j) {
      Vec<T> g;
      load(g, gs + k * F + f0 + j * kLanes<T>);
      acc[j] += he[k] * g;
    }
  }
  for (int j = 0; j < kVecs; ++j) store(gx + f0 + j * kLanes<T>, w * acc[j]);
}

// grad_h and edge_grad_x of every edge of row r, from the row's grad_S block gs ([K, F]).
template <typename T>
void edge_grad_row(const NnconvEdgeGradParams& p, int64_t r, const T* __restrict gs) {
  const int64_t K = p.hidden, F = p.features;
  const T* __restrict x = static_cast<const T*>(p.x);
  const T* __restrict h = static_cast<const T*>(p.h);
  const T* __restrict ga = p.grad_a ? static_cast<const T*>(p.grad_a) + r * F : nullptr;
  const T w = nnconv_row_factor<T>(p.row_scale, r);
  for (int64_t e = p.rowptr[r]; e < p.rowptr[r + 1]; ++e) {
    const T* __restrict xu = x + p.col[e] * F;
    const T* __restrict he = h + e * K;
    T* __restrict gh = static_cast<T*>(p.grad_h) + e * K;
    T* __restrict gx = static_cast<T*>(p.edge_grad_x) + e * F;
    for (int64_t k = 0; k < K; ++k) gh[k] = w * lane_dot(gs + k * F, xu, F);
    int64_t f0 = 0;
    for (; f0 + kVecs * kLanes<T> <= F; f0 += kVecs * kLanes<T>)
      edge_grad_x_tile(gs, ga, he, K, F, f0, w, gx);
    for (int64_t f = f0; f < F; ++f) {
      T sum = ga ? ga[f] : T(0);
      for (int64_t k = 0; k < K; ++k) sum += he[k] * gs[k * F + f];
      gx[f] = w * sum;
    }
  }
}

// grad_x[u]: the edge gradients of u's out-edges, summed in CSC order.
template <typename T>
void grad_x_col(const NnconvGradXParams& p, int64_t u) {
  const int64_t F = p.features;
  const T* __restrict egx = static_cast<const T*>(p.edge_grad_x);
  T* __restrict gx = static_cast<T*>(p.grad_x) + u * F;
  std::fill(gx, gx + F, T(0));
  const int64_t begin = p.colptr[u], end = p.colptr[u + 1];
  for (int64_t s = begin; s < end; ++s) {
    if (s + kPrefetchEdges < end) prefetch_span(egx + p.csc_edge_id[s + kPrefetchEdges] * F, F);
    const T* __restrict g = egx + p.csc_edge_id[s] * F;
    for (int64_t f = 0; f < F; ++f) gx[f] += g[f];
  }
}

template <typename Params>
void check_rows(const char* kernel, const Params& p, int64_t first, int64_t last) {
  const EdgeRange edges = checked_rows(kernel, "rowptr", p.rowptr, first, last, p.num_edges);
  check_indices(kernel, "col", p.col, edges.begin, edges.end, p.num_cols);
}

inline void check_columns(const NnconvGradXParams& p, int64_t first, int64_t last) {
  const char* kernel = "nnconv_aggregate backward";
  const EdgeRange edges = checked_rows(kernel, "colptr", p.colptr, first, last, p.num_edges);
  check_indices(kernel, "csc_edge_id", p.csc_edge_id, edges.begin, edges.end, p.num_edges);
}

template <typename T>
void forward_rows(const NnconvParams& p) {
  const auto check = [&](int64_t first, int64_t last) {
    check_rows("nnconv_aggregate", p, first, last);
  };
  const int64_t KF = p.hidden * p.features;
  T* s = static_cast<T*>(p.s);
  T* a = static_cast<T*>(p.a);
  for_each_row(p.rowptr, p.num_rows, check,
               [&](int64_t r) { forward_row<T>(p, r, s + r * KF, a + r * p.features); });
}

template <typename T>
void edge_grad_rows(const NnconvEdgeGradParams& p) {
  const auto check = [&](int64_t first, int64_t last) {
    check_rows("nnconv_aggregate backward", p, first, last);
  };
  const T* gs = static_cast<const T*>(p.grad_s);
  const int64_t KF = p.hidden * p.features;
  for_each_row(p.rowptr, p.num_rows, check,
               [&](int64_t r) { edge_grad_row<T>(p, r, gs + r * KF); });
}

template <typename T>
void grad_x_cols(const NnconvGradXParams& p) {
  const auto check = [&](int64_t first, int64_t last) { check_columns(p, first, last); };
  for_each_row(p.colptr, p.num_cols, check, [&](int64_t u) { grad_x_col<T>(p, u); });
}

}  // namespace

void nnconv_forward(const NnconvParams& p) {
  if (p.dtype == DType::kFloat32) {
    forward_rows<float>(p);
  } else {
    forward_rows<double>(p);
  }
}

void nnconv_edge_grad(const NnconvEdgeGradParams& p) {
  if (p.dtype == DType::kFloat32) {
    edge_grad_rows<float>(p);
  } else {
    edge_grad_rows<double>(p);
  }
}

void nnconv_grad_x(const NnconvGradXParams& p) {
  if (p.dtype == DType::kFloat32) {
    grad_x_cols<float>(p);
  } else {
    grad_x_cols<double>(p);
  }
}

}  // namespace GALFAST_CPU_ISA
}  // namespace galfast
