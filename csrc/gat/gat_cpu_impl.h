// CPU (OpenMP) fused GAT, compiled once per instruction set (gat_cpu.cpp: baseline,
// gat_cpu_avx2.cpp: -mavx2 -mfma) and chosen at run time.
// Thread mapping: rows (for the backward's transpose pass, source nodes) are cut into
// edge-balanced chunks (balanced_row_chunks) handed out dynamically; one thread owns a whole
// row: it walks the row's edges once, and for each edge loops over heads, then over the head's
// features innermost so the compiler vectorises it. The rows that edge e + kPrefetchEdges will
// gather are prefetched while edge e is processed (the random gathers are the bottleneck).
// Heads are taken in blocks of kHeadBlock so the softmax states live on the stack. Every output
// element is written by one thread in CSR (or CSC) order, so results are bitwise identical for
// any thread count.
#pragma once

#ifndef GALFAST_CPU_ISA
#error "define GALFAST_CPU_ISA before including gat_cpu_impl.h"
#endif

#include <algorithm>
#include <vector>

#include "common/parallel.h"
#include "common/prefetch.h"
#include "gat/gat.h"
#include "gat/gat_dropout.h"
#include "gat/gat_row.h"

namespace galfast {
namespace GALFAST_CPU_ISA {
namespace {

constexpr int64_t kHeadBlock = 16;
constexpr int64_t kPrefetchEdges = 8;  // how far ahead of the current edge rows are fetched

template <typename T>
T dot(const T* __restrict a, const T* __restrict b, int64_t n) {
  T s = T(0);
#pragma omp simd reduction(+ : s)
  for (int64_t f = 0; f < n; ++f) s += a[f] * b[f];
  return s;
}

// Runs body(r) for r in [0, num_rows), edge-balanced and dynamically scheduled.
template <typename Body>
void for_each_row(const int64_t* ptr, int64_t num_rows, Body body) {
  const std::vector<int64_t> chunks = balanced_row_chunks(ptr, num_rows, 16 * max_threads());
  const int64_t num_chunks = static_cast<int64_t>(chunks.size()) - 1;
#pragma omp parallel for schedule(dynamic, 1) num_threads(max_threads())
  for (int64_t c = 0; c < num_chunks; ++c) {
    for (int64_t r = chunks[c]; r < chunks[c + 1]; ++r) body(r);
  }
}

template <typename T>
void forward_row(const GatParams& p, const AttentionDropout& drop, int64_t i) {
  const int64_t H = p.heads, F = p.features, HF = H * F;
  const T slope = static_cast<T>(p.negative_slope);
  const T* __restrict h = static_cast<const T*>(p.h);
  const T* __restrict a_src = static_cast<const T*>(p.alpha_src);
  const T* __restrict a_dst = static_cast<const T*>(p.alpha_dst) + i * H;
  T* __restrict out = static_cast<T*>(p.out) + i * HF;
  T* __restrict lse = static_cast<T*>(p.lse) + i * H;
  std::fill(out, out + HF, T(0));
  for (int64_t k0 = 0; k0 < H; k0 += kHeadBlock) {
    const int64_t k1 = std::min(H, k0 + kHeadBlock);
    OnlineSoftmax<T> softmax[kHeadBlock];
    const int64_t end = p.rowptr[i + 1];
    for (int64_t e = p.rowptr[i]; e < end; ++e) {
      if (e + kPrefetchEdges < end) {
        const int64_t ahead = p.col[e + kPrefetchEdges];
        prefetch_span(h + ahead * HF + k0 * F, (k1 - k0) * F);
        __builtin_prefetch(a_src + ahead * H + k0);
      }
      const int64_t j = p.col[e];
      for (int64_t k = k0; k < k1; ++k) {
        T* __restrict acc = out + k * F;
        const T* __restrict hj = h + j * HF + k * F;
        T weight;
        const T rescale =
            softmax[k - k0].push(leaky_relu(a_src[j * H + k] + a_dst[k], slope), weight);
        if (rescale != T(1)) {
#pragma omp simd
          for (int64_t f = 0; f < F; ++f) acc[f] *= rescale;
        }
        weight *= drop.keep<T>(e, k);
        if (weight == T(0)) continue;
#pragma omp simd
        for (int64_t f = 0; f < F; ++f) acc[f] += weight * hj[f];
      }
    }
    for (int64_t k = k0; k < k1; ++k) {
      const T inv = softmax[k - k0].inv_sum();
      T* __restrict acc = out + k * F;
#pragma omp simd
      for (int64_t f = 0; f < F; ++f) acc[f] *= inv;
      lse[k] = softmax[k - k0].lse();
    }
  }
}

// delta[i, k] = <grad_out[i, k], out[i, k]>.
template <typename T>
void backward_delta_row(const GatBackwardParams& p, int64_t i) {
  const int64_t H = p.heads, F = p.features;
  const T* __restrict go = static_cast<const T*>(p.grad_out) + i * H * F;
  const T* __restrict out = static_cast<const T*>(p.out) + i * H * F;
  T* __restrict delta = static_cast<T*>(p.delta) + i * H;
  for (int64_t k = 0; k < H; ++k) delta[k] = dot(go + k * F, out + k * F, F);
}

// Source side, over the transpose: grad_h[j], grad_alpha_src[j], and dz_e parked in
// edge_grad at each edge's CSR position.
template <typename T>
void backward_col(const GatBackwardParams& p, const AttentionDropout& drop, int64_t j) {
  const int64_t H = p.heads, F = p.features, HF = H * F;
  const T slope = static_cast<T>(p.negative_slope);
  const T* __restrict hj = static_cast<const T*>(p.h) + j * HF;
  const T* __restrict a_src = static_cast<const T*>(p.alpha_src) + j * H;
  const T* __restrict a_dst = static_cast<const T*>(p.alpha_dst);
  const T* __restrict grad_out = static_cast<const T*>(p.grad_out);
  const T* __restrict lse = static_cast<const T*>(p.lse);
  const T* __restrict delta = static_cast<const T*>(p.delta);
  T* __restrict edge_grad = static_cast<T*>(p.edge_grad);
  T* __restrict grad_h = static_cast<T*>(p.grad_h) + j * HF;
  T* __restrict grad_src = static_cast<T*>(p.grad_alpha_src) + j * H;
  std::fill(grad_h, grad_h + HF, T(0));
  std::fill(grad_src, grad_src + H, T(0));
  const int64_t end = p.colptr[j + 1];
  for (int64_t s = p.colptr[j]; s < end; ++s) {
    if (s + kPrefetchEdges < end) {
      const int64_t ahead = p.csc_row[s + kPrefetchEdges];
      prefetch_span(grad_out + ahead * HF, HF);
      __builtin_prefetch(a_dst + ahead * H);
      __builtin_prefetch(lse + ahead * H);
      __builtin_prefetch(delta + ahead * H);
      __builtin_prefetch(edge_grad + p.csc_edge_id[s + kPrefetchEdges] * H, 1);
    }
    const int64_t i = p.csc_row[s], e = p.csc_edge_id[s];
    const T* __restrict go = grad_out + i * HF;
    for (int64_t k = 0; k < H; ++k) {
      const int64_t ik = i * H + k;
      const EdgeAttention<T> att = recompute_attention(a_src[k], a_dst[ik], lse[ik], slope);
      const T keep = drop.keep<T>(e, k);
      T g = T(0);
      if (keep != T(0)) {
        const T* __restrict gok = go + k * F;
        const T* __restrict hjk = hj + k * F;
        T* __restrict ghk = grad_h + k * F;
        const T weight = keep * att.prob;
#pragma omp simd reduction(+ : g)
        for (int64_t f = 0; f < F; ++f) {
          g += gok[f] * hjk[f];
          ghk[f] += weight * gok[f];
        }
      }
      const T dz = logit_grad(att, keep, g, delta[ik]);
      grad_src[k] += dz;
      edge_grad[e * H + k] = dz;
    }
  }
}

// grad_alpha_dst[i, k] = sum of the row's dz_e, in CSR order.
template <typename T>
void backward_dst_row(const GatBackwardParams& p, int64_t i) {
  const int64_t H = p.heads;
  const T* __restrict edge_grad = static_cast<const T*>(p.edge_grad);
  T* __restrict grad_dst = static_cast<T*>(p.grad_alpha_dst) + i * H;
  std::fill(grad_dst, grad_dst + H, T(0));
  for (int64_t e = p.rowptr[i]; e < p.rowptr[i + 1]; ++e) {
    for (int64_t k = 0; k < H; ++k) grad_dst[k] += edge_grad[e * H + k];
  }
}

template <typename T>
void forward(const GatParams& p) {
  const AttentionDropout drop(p.dropout, p.seed);
  for_each_row(p.rowptr, p.num_rows, [&](int64_t i) { forward_row<T>(p, drop, i); });
}

template <typename T>
void backward(const GatBackwardParams& p) {
  const AttentionDropout drop(p.dropout, p.seed);
  // Each pass reads what the one before wrote (delta, then edge_grad).
  for_each_row(p.rowptr, p.num_rows, [&](int64_t i) { backward_delta_row<T>(p, i); });
  for_each_row(p.colptr, p.num_cols, [&](int64_t j) { backward_col<T>(p, drop, j); });
  for_each_row(p.rowptr, p.num_rows, [&](int64_t i) { backward_dst_row<T>(p, i); });
}

}  // namespace

void gat_forward(const GatParams& p) {
  if (p.dtype == DType::kFloat32) {
    forward<float>(p);
  } else {
    forward<double>(p);
  }
}

void gat_backward(const GatBackwardParams& p) {
  if (p.dtype == DType::kFloat32) {
    backward<float>(p);
  } else {
    backward<double>(p);
  }
}

}  // namespace GALFAST_CPU_ISA
}  // namespace galfast
