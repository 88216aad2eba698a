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

// B [depth, n] (row-major, ldb) as panels of kVecs vectors of columns: panel j holds columns
// [j * width, (j + 1) * width) for every k contiguously ([ceil(n / width)][depth][width], zero
// past n), so a register tile streams its B values in order. Read with a power-of-two row
// stride instead (W3's rows, 8192 floats apart in W3^T), every load of a tile fell in the same
// L1 set.
template <typename T>
std::vector<T> pack_panels(const T* B, int64_t depth, int64_t n, int64_t ldb) {
  constexpr int64_t kWidth = kVecs * kLanes<T>;
  const int64_t panels = (n + kWidth - 1) / kWidth;
  std::vector<T> packed(std::max<int64_t>(1, panels * depth * kWidth), T(0));
  for (int64_t j = 0; j < panels; ++j) {
    const int64_t cols = std::min(kWidth, n - j * kWidth);
    T* panel = packed.data() + j * depth * kWidth;
    for (int64_t k = 0; k < depth; ++k)
      std::copy(B + k * ldb + j * kWidth, B + k * ldb + j * kWidth + cols, panel + k * kWidth);
  }
  return packed;
}

// C[i, j] (+)= sum_k A[i * a_row + k * a_col] * panel[k * width + j] for the tile's kR rows and
// its `cols` columns (at most one panel's width); `accumulate` false overwrites C.
template <typename T, int kR>
[[gnu::always_inline]] inline void gemm_tile(int64_t depth, const T* __restrict A, int64_t a_row,
                                             int64_t a_col, const T* __restrict panel,
                                             T* __restrict C, int64_t ldc, int64_t cols,
                                             bool accumulate) {
  constexpr int64_t kWidth = kVecs * kLanes<T>;
  Vec<T> acc[kR][kVecs] = {};
  T edge[kWidth];  // a partial tile's columns go through here
  if (accumulate) {
    for (int i = 0; i < kR; ++i) {
      const T* c = C + i * ldc;
      if (cols < kWidth) {
        std::fill(edge, edge + kWidth, T(0));
        std::copy(c, c + cols, edge);
        c = edge;
      }
      for (int j = 0; j < kVecs; ++j) load(acc[i][j], c + j * kLanes<T>);
    }
  }
  for (int64_t k = 0; k < depth; ++k) {
    Vec<T> b[kVecs];
    for (int j = 0; j < kVecs; ++j) load(b[j], panel + k * kWidth + j * kLanes<T>);
    for (int i = 0; i < kR; ++i) {
      const T a = A[i * a_row + k * a_col];
      for (int j = 0; j < kVecs; ++j) acc[i][j] += a * b[j];
    }
  }
  for (int i = 0; i < kR; ++i) {
    if (cols == kWidth) {
      for (int j = 0; j < kVecs; ++j) store(C + i * ldc + j * kLanes<T>, acc[i][j]);
    } else {
      for (int j = 0; j < kVecs; ++j) store(edge + j * kLanes<T>, acc[i][j]);
      std::copy(edge, edge + cols, C + i * ldc);
    }
  }
}

// C [m, n] (+)= A [m, depth] (strides a_row, a_col) times B [depth, n] given as
// pack_panels(B).
template <typename T>
void gemm(int64_t m, int64_t n, int64_t depth, const T* A, int64_t a_row, int64_t a_col,
          const T* packed, T* C, int64_t ldc, bool accumulate) {
  constexpr int64_t kWidth = kVecs * kLanes<T>;
  const int64_t panels = (n + kWidth - 1) / kWidth;
  if (depth == 0 && !accumulate) {
    for (int64_t i = 0; i < m; ++i) std::fill(C + i * ldc, C + i * ldc + n, T(0));
  }
  for (int64_t k0 = 0; k0 < depth; k0 += kGemmDepth) {
    const int64_t d = std::min(kGemmDepth, depth - k0);
    const bool acc = accumulate || k0 > 0;
    const T* Ak = A + k0 * a_col;
    int64_t i = 0;
    for (; i + kGemmRows <= m; i += kGemmRows) {
      for (int64_t j = 0; j < panels; ++j) {
        const T* panel = packed + (j * depth + k0) * kWidth;
        const int64_t cols = std::min(kWidth, n - j * kWidth);
        gemm_tile<T, kGemmRows>(d, Ak + i * a_row, a_row, a_col, panel, C + i * ldc + j * kWidth,
                                ldc, cols, acc);
      }
    }
    for (; i < m; ++i) {
      for (int64_t j = 0; j < panels; ++j) {
        const T* panel = packed + (j * depth + k0) * kWidth;
        const int64_t cols = std::min(kWidth, n - j * kWidth);
        gemm_tile<T, 1>(d, Ak + i * a_row, a_row, a_col, panel, C + i * ldc + j * kWidth, ldc, cols,
                        acc);
      }
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
  const std::vector<T> w3 = pack_panels(static_cast<const T*>(p.w3), KF, O, O);
  T* out = static_cast<T*>(p.out);
  T* a = static_cast<T*>(p.a);
  const auto check = [&](int64_t first, int64_t last) {
    check_rows("nnconv_aggregate", q, first, last);
  };
  for_each_tile<T>(p.rowptr, p.num_rows, tile_rows<T>(KF), KF, check,
                   [&](int64_t r0, int64_t r1, T* s) {
                     for (int64_t r = r0; r < r1; ++r)
                       forward_row<T>(q, r, s + (r - r0) * KF, a + r * F);
                     gemm<T>(r1 - r0, O, KF, s, KF, 1, w3.data(), out + r0 * O, O, false);
                   });
}

// grad_S of a tile of rows from grad_out and W3^T, then the edges' gradients from it.
template <typename T>
void fused_edge_grads(const NnconvFusedParams& p) {
  const NnconvEdgeGradParams q = edge_grad_params(p);
  const int64_t O = p.out_features, KF = p.hidden * p.features;
  const std::vector<T> w3t = pack_panels(static_cast<const T*>(p.w3t), O, KF, KF);
  const T* grad_out = static_cast<const T*>(p.grad_out);
  const auto check = [&](int64_t first, int64_t last) {
    check_rows("nnconv_aggregate backward", q, first, last);
  };
  for_each_tile<T>(p.rowptr, p.num_rows, tile_rows<T>(KF), KF, check,
                   [&](int64_t r0, int64_t r1, T* gs) {
                     gemm<T>(r1 - r0, KF, O, grad_out + r0 * O, O, 1, w3t.data(), gs, KF, false);
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
          const std::vector<T> g = pack_panels(grad_out + v0 * O, v1 - v0, O, O);
          gemm<T>(width, O, v1 - v0, buffer.data(), 1, width, g.data(), c, O, v0 > 0);
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
