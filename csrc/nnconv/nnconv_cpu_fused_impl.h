// The CPU NNConv op in one parallel region per pass (nnconv.h, NnconvFusedParams), built on the
// row kernels of nnconv_cpu_impl.h, compiled once per instruction set.
// Thread mapping: forward and the backward's row pass take edge-balanced chunks of rows
// (balanced_row_chunks, dynamic schedule); a thread builds S (or grad_S) for a tile of its rows
// in a private buffer that stays in cache and multiplies it with W3 (or W3^T) at once. The
// weight pass hands out slices of kRows hidden units: the thread owning a slice owns its rows of
// grad_W3, recomputes that slice of S over all rows in fixed tiles and accumulates it, so no
// reduction between threads exists and the sums never depend on the thread count.
#pragma once

#include <algorithm>
#include <vector>

#include "common/parallel.h"
#include "nnconv/nnconv.h"
#include "nnconv/nnconv_cpu_impl.h"

namespace galfast {
namespace GALFAST_CPU_ISA {
namespace {

// Register tile of the small GEMMs: kGemmRows rows of C by kVecs vectors of columns; the inner
// dimension in blocks of kGemmDepth so a block of B stays in L2 across a tile's rows.
constexpr int kGemmRows = 4;
constexpr int64_t kGemmDepth = 256;
// Bytes of S (or grad_S) a thread keeps for one tile of rows.
constexpr int64_t kTileBytes = 512 * 1024;
// Rows per tile of the weight pass (a fixed number: the row order of grad_W3's sums).
constexpr int64_t kWeightTileRows = 64;

// C[i, j] (+)= sum_k A[i * a_row + k * a_col] * B[k * ldb + j] for the tile's kR rows and
// kVecs vectors of columns; `accumulate` false overwrites C.
template <typename T, int kR>
[[gnu::always_inline]] inline void gemm_tile(int64_t depth, const T* __restrict A, int64_t a_row,
                                             int64_t a_col, const T* __restrict B, int64_t ldb,
                                             T* __restrict C, int64_t ldc, bool accumulate) {
  Vec<T> acc[kR][kVecs] = {};
  if (accumulate) {
    for (int i = 0; i < kR; ++i) {
      for (int j = 0; j < kVecs; ++j) load(acc[i][j], C + i * ldc + j * kLanes<T>);
    }
  }
  for (int64_t k = 0; k < depth; ++k) {
    Vec<T> b[kVecs];
    for (int j = 0; j < kVecs; ++j) load(b[j], B + k * ldb + j * kLanes<T>);
    for (int i = 0; i < kR; ++i) {
      const T a = A[i * a_row + k * a_col];
      for (int j = 0; j < kVecs; ++j) acc[i][j] += a * b[j];
    }
  }
  for (int i = 0; i < kR; ++i) {
    for (int j = 0; j < kVecs; ++j) store(C + i * ldc + j * kLanes<T>, acc[i][j]);
  }
}

// Columns [j0, n) of rows [0, m) left over after the register tiles: a plain loop.
template <typename T>
inline void gemm_rest(int64_t m, int64_t j0, int64_t n, int64_t depth, const T* A, int64_t a_row,
                      int64_t a_col, const T* B, int64_t ldb, T* C, int64_t ldc, bool accumulate) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = j0; j < n; ++j) {
      T sum = accumulate ? C[i * ldc + j] : T(0);
      for (int64_t k = 0; k < depth; ++k) sum += A[i * a_row + k * a_col] * B[k * ldb + j];
      C[i * ldc + j] = sum;
    }
  }
}

// C [m, n] (+)= A [m, depth] (strides a_row, a_col) times B [depth, n] (row-major, ldb).
template <typename T>
void gemm(int64_t m, int64_t n, int64_t depth, const T* A, int64_t a_row, int64_t a_col, const T* B,
          int64_t ldb, T* C, int64_t ldc, bool accumulate) {
  constexpr int64_t kWidth = kVecs * kLanes<T>;
  if (depth == 0 && !accumulate) {
    for (int64_t i = 0; i < m; ++i) std::fill(C + i * ldc, C + i * ldc + n, T(0));
  }
  for (int64_t k0 = 0; k0 < depth; k0 += kGemmDepth) {
    const int64_t d = std::min(kGemmDepth, depth - k0);
    const bool acc = accumulate || k0 > 0;
    const T* Ak = A + k0 * a_col;
    const T* Bk = B + k0 * ldb;
    int64_t i = 0;
    for (; i + kGemmRows <= m; i += kGemmRows) {
      const T* Ai = Ak + i * a_row;
      T* Ci = C + i * ldc;
      int64_t j = 0;
      for (; j + kWidth <= n; j += kWidth)
        gemm_tile<T, kGemmRows>(d, Ai, a_row, a_col, Bk + j, ldb, Ci + j, ldc, acc);
      gemm_rest(kGemmRows, j, n, d, Ai, a_row, a_col, Bk, ldb, Ci, ldc, acc);
    }
    for (; i < m; ++i) {
      const T* Ai = Ak + i * a_row;
      T* Ci = C + i * ldc;
      int64_t j = 0;
      for (; j + kWidth <= n; j += kWidth)
        gemm_tile<T, 1>(d, Ai, a_row, a_col, Bk + j, ldb, Ci + j, ldc, acc);
      gemm_rest(1, j, n, d, Ai, a_row, a_col, Bk, ldb, Ci, ldc, acc);
    }
  }
}

inline NnconvParams row_params(const NnconvFusedParams& p) {
  NnconvParams q;
  q.rowptr = p.rowptr;
  q.col = p.col;
  q.row_scale = p.row_scale;
  q.x = p.x;
  q.h = p.h;
  q.num_edges = p.num_edges;
  q.num_rows = p.num_rows;
  q.num_cols = p.num_cols;
  q.hidden = p.hidden;
  q.features = p.features;
  q.dtype = p.dtype;
  return q;
}

inline NnconvEdgeGradParams edge_grad_params(const NnconvFusedParams& p) {
  NnconvEdgeGradParams q;
  q.rowptr = p.rowptr;
  q.col = p.col;
  q.row_scale = p.row_scale;
  q.x = p.x;
  q.h = p.h;
  q.grad_a = p.grad_a;
  q.grad_h = p.grad_h;
  q.edge_grad_x = p.edge_grad_x;
  q.num_edges = p.num_edges;
  q.num_rows = p.num_rows;
  q.num_cols = p.num_cols;
  q.hidden = p.hidden;
  q.features = p.features;
  q.dtype = p.dtype;
  return q;
}

template <typename T>
int64_t tile_rows(int64_t width) {
  return std::max<int64_t>(1, kTileBytes / std::max<int64_t>(1, width * int64_t(sizeof(T))));
}

// Runs tile(first, last, buffer) over tiles of at most `rows` consecutive rows of edge-balanced
// chunks, in one parallel region; each thread owns a buffer of rows * width values. check(first,
// last) runs before a chunk's tiles.
template <typename T, typename Check, typename Tile>
void for_each_tile(const int64_t* rowptr, int64_t num_rows, int64_t rows, int64_t width,
                   Check check, Tile tile) {
  const int threads = max_threads();
  const std::vector<int64_t> chunks = balanced_row_chunks(rowptr, num_rows, 16 * threads);
  const int64_t num_chunks = static_cast<int64_t>(chunks.size()) - 1;
  ParallelErrors errors;
#pragma omp parallel num_threads(threads)
  {
    std::vector<T> buffer;
#pragma omp for schedule(dynamic, 1)
    for (int64_t c = 0; c < num_chunks; ++c) {
      if (errors.failed()) continue;
      try {
        if (buffer.empty()) buffer.resize(std::max<int64_t>(1, rows * width));
        check(chunks[c], chunks[c + 1]);
        for (int64_t r0 = chunks[c]; r0 < chunks[c + 1]; r0 += rows)
          tile(r0, std::min(r0 + rows, chunks[c + 1]), buffer.data());
      } catch (...) {
        errors.capture();
      }
    }
  }
  errors.rethrow();
}

template <typename T>
void fused_forward(const NnconvFusedParams& p) {
  const NnconvParams q = row_params(p);
  const int64_t F = p.features, O = p.out_features, KF = p.hidden * F;
  const T* w3 = static_cast<const T*>(p.w3);
  T* out = static_cast<T*>(p.out);
  T* a = static_cast<T*>(p.a);
  const auto check = [&](int64_t first, int64_t last) {
    check_rows("nnconv_aggregate", q, first, last);
  };
  for_each_tile<T>(p.rowptr, p.num_rows, tile_rows<T>(KF), KF, check,
                   [&](int64_t r0, int64_t r1, T* s) {
                     for (int64_t r = r0; r < r1; ++r)
                       forward_row<T>(q, r, s + (r - r0) * KF, a + r * F);
                     gemm<T>(r1 - r0, O, KF, s, KF, 1, w3, O, out + r0 * O, O, false);
                   });
}

// grad_S of a tile of rows from grad_out and W3^T, then the edges' gradients from it.
template <typename T>
void fused_edge_grads(const NnconvFusedParams& p) {
  const NnconvEdgeGradParams q = edge_grad_params(p);
  const int64_t O = p.out_features, KF = p.hidden * p.features;
  const T* w3t = static_cast<const T*>(p.w3t);
  const T* grad_out = static_cast<const T*>(p.grad_out);
  const auto check = [&](int64_t first, int64_t last) {
    check_rows("nnconv_aggregate backward", q, first, last);
  };
  for_each_tile<T>(p.rowptr, p.num_rows, tile_rows<T>(KF), KF, check,
                   [&](int64_t r0, int64_t r1, T* gs) {
                     gemm<T>(r1 - r0, KF, O, grad_out + r0 * O, O, 1, w3t, KF, gs, KF, false);
                     for (int64_t r = r0; r < r1; ++r) edge_grad_row<T>(q, r, gs + (r - r0) * KF);
                   });
}

// grad_W3 rows [k0 * F, k1 * F) for each slice [k0, k1) of kRows hidden units.
template <typename T>
void fused_weight_grad(const NnconvFusedParams& p) {
  const NnconvParams q = row_params(p);
  const int64_t K = p.hidden, F = p.features, O = p.out_features;
  const int64_t num_slices = (K + kRows - 1) / kRows;
  const T* grad_out = static_cast<const T*>(p.grad_out);
  T* grad_w3 = static_cast<T*>(p.grad_w3);
  const int threads = max_threads();
  ParallelErrors errors;
#pragma omp parallel num_threads(threads)
  {
    std::vector<T> buffer;
#pragma omp for schedule(dynamic, 1)
    for (int64_t slice = 0; slice < num_slices; ++slice) {
      if (errors.failed()) continue;
      try {
        const int64_t k0 = slice * kRows, k1 = std::min(k0 + kRows, K), width = (k1 - k0) * F;
        if (buffer.empty()) buffer.resize(kWeightTileRows * kRows * F);
        T* c = grad_w3 + k0 * F * O;
        if (p.num_rows == 0) std::fill(c, c + width * O, T(0));
        for (int64_t v0 = 0; v0 < p.num_rows; v0 += kWeightTileRows) {
          const int64_t v1 = std::min(v0 + kWeightTileRows, p.num_rows);
          for (int64_t v = v0; v < v1; ++v) {
            const T w = nnconv_row_factor<T>(p.row_scale, v);
            s_units<T>(q, v, w, k0, k1, buffer.data() + (v - v0) * width);
          }
          // C [width, O] += S_slice^T [width, v1 - v0] times grad_out [v1 - v0, O].
          gemm<T>(width, O, v1 - v0, buffer.data(), 1, width, grad_out + v0 * O, O, c, O, v0 > 0);
        }
      } catch (...) {
        errors.capture();
      }
    }
  }
  errors.rethrow();
}

}  // namespace

void nnconv_fused_forward(const NnconvFusedParams& p) {
  if (p.dtype == DType::kFloat32) {
    fused_forward<float>(p);
  } else {
    fused_forward<double>(p);
  }
}

// The row pass checks the indices the weight pass then reads, so it runs first.
void nnconv_fused_backward(const NnconvFusedParams& p) {
  if (p.dtype == DType::kFloat32) {
    fused_edge_grads<float>(p);
    fused_weight_grad<float>(p);
  } else {
    fused_edge_grads<double>(p);
    fused_weight_grad<double>(p);
  }
}

}  // namespace GALFAST_CPU_ISA
}  // namespace galfast
