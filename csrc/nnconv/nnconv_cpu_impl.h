// CPU (OpenMP) NNConv kernels, compiled once per instruction set (nnconv_cpu.cpp: baseline,
// nnconv_cpu_avx2.cpp: -mavx2 -mfma) and chosen at run time.
// Thread mapping: rows (for grad_x, source nodes of the CSC) are cut into edge-balanced chunks
// (balanced_row_chunks) handed out dynamically; one thread owns a whole row. For S it walks
// the row's edges and adds each edge's outer product w_e h_e (x) x_u to the row's K x F block,
// which stays in L1 (32 KB at K = 128, F = 64 in float32) while the edges stream by; the
// feature loop is innermost and vectorises. The backward's row pass reads the row's grad_S
// block once per edge from L1 as well. Every output element is written by one thread in CSR
// (or CSC) order, so results are bitwise identical for any thread count.
#pragma once

#ifndef GALFAST_CPU_ISA
#error "define GALFAST_CPU_ISA before including nnconv_cpu_impl.h"
#endif

#include <algorithm>

#include "common/csr_check.h"
#include "common/parallel.h"
#include "common/prefetch.h"
#include "nnconv/nnconv.h"
#include "nnconv/nnconv_row.h"

namespace galfast {
namespace GALFAST_CPU_ISA {
namespace {

// S[r] and A[r]: the row's outer products, edge by edge.
template <typename T>
void forward_row(const NnconvParams& p, int64_t r) {
  const int64_t K = p.hidden, F = p.features;
  const T* __restrict x = static_cast<const T*>(p.x);
  const T* __restrict h = static_cast<const T*>(p.h);
  T* __restrict s = static_cast<T*>(p.s) + r * K * F;
  T* __restrict a = static_cast<T*>(p.a) + r * F;
  std::fill(s, s + K * F, T(0));
  std::fill(a, a + F, T(0));
  const T w = nnconv_row_factor<T>(p.row_scale, r);
  const int64_t begin = p.rowptr[r], end = p.rowptr[r + 1];
  for (int64_t e = begin; e < end; ++e) {
    if (e + 1 < end) prefetch_span(x + p.col[e + 1] * F, F);
    const T* __restrict xu = x + p.col[e] * F;
    const T* __restrict he = h + e * K;
    for (int64_t f = 0; f < F; ++f) a[f] += w * xu[f];
    for (int64_t k = 0; k < K; ++k) {
      const T wh = w * he[k];
      T* __restrict sk = s + k * F;
      for (int64_t f = 0; f < F; ++f) sk[f] += wh * xu[f];
    }
  }
}

// grad_h and edge_grad_x of every edge of row r.
template <typename T>
void edge_grad_row(const NnconvEdgeGradParams& p, int64_t r) {
  const int64_t K = p.hidden, F = p.features;
  const T* __restrict x = static_cast<const T*>(p.x);
  const T* __restrict h = static_cast<const T*>(p.h);
  const T* __restrict gs = static_cast<const T*>(p.grad_s) + r * K * F;
  const T* __restrict ga = p.grad_a ? static_cast<const T*>(p.grad_a) + r * F : nullptr;
  const T w = nnconv_row_factor<T>(p.row_scale, r);
  for (int64_t e = p.rowptr[r]; e < p.rowptr[r + 1]; ++e) {
    const T* __restrict xu = x + p.col[e] * F;
    const T* __restrict he = h + e * K;
    T* __restrict gh = static_cast<T*>(p.grad_h) + e * K;
    T* __restrict gx = static_cast<T*>(p.edge_grad_x) + e * F;
    for (int64_t k = 0; k < K; ++k) gh[k] = w * strided_dot<T>(gs + k * F, xu, F, 0, 1);
    if (ga) {
      std::copy(ga, ga + F, gx);
    } else {
      std::fill(gx, gx + F, T(0));
    }
    for (int64_t k = 0; k < K; ++k) {
      const T hk = he[k];
      const T* __restrict gsk = gs + k * F;
      for (int64_t f = 0; f < F; ++f) gx[f] += hk * gsk[f];
    }
    for (int64_t f = 0; f < F; ++f) gx[f] *= w;
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
  for_each_row(p.rowptr, p.num_rows, check, [&](int64_t r) { forward_row<T>(p, r); });
}

template <typename T>
void edge_grad_rows(const NnconvEdgeGradParams& p) {
  const auto check = [&](int64_t first, int64_t last) {
    check_rows("nnconv_aggregate backward", p, first, last);
  };
  for_each_row(p.rowptr, p.num_rows, check, [&](int64_t r) { edge_grad_row<T>(p, r); });
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
