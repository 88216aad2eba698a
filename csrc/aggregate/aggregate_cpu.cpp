// CPU (OpenMP) aggregation. Thread mapping: rows are cut into edge-balanced chunks
// (balanced_row_chunks) handed out dynamically; one thread reduces a whole row, edge by edge,
// with the feature loop innermost so the compiler vectorises it. Each row's result depends
// only on its own edges in CSR order, so the output is bitwise identical for any thread count.
#include <algorithm>
#include <stdexcept>

#include "aggregate/aggregate.h"
#include "aggregate/aggregate_row.h"
#include "common/parallel.h"

namespace galfast {
namespace {

template <typename T>
void aggregate_row(const AggregateParams& p, int64_t r) {
  const int64_t F = p.num_features;
  const T* __restrict x = static_cast<const T*>(p.x);
  T* __restrict out = static_cast<T*>(p.out) + r * F;
  const int64_t begin = p.rowptr[r], end = p.rowptr[r + 1];

  if (p.mode == AggMode::kMax) {
    int64_t* __restrict arg = p.arg + r * F;
    std::fill(out, out + F, T(0));
    std::fill(arg, arg + F, int64_t(-1));
    for (int64_t e = begin; e < end; ++e) {
      const int64_t c = p.col[e], id = edge_ident(p, e);
      const T w = edge_factor<T, T>(p, r, c, id);
      const T* __restrict xr = x + c * F;
      for (int64_t f = 0; f < F; ++f) {
        const T v = w * xr[f];
        if (max_takes(v, out[f], arg[f])) {
          out[f] = v;
          arg[f] = id;
        }
      }
    }
    return;
  }

  std::fill(out, out + F, T(0));
  for (int64_t e = begin; e < end; ++e) {
    const int64_t c = p.col[e], id = edge_ident(p, e);
    const T w = edge_factor<T, T>(p, r, c, id);
    const T* __restrict xr = x + c * F;
    if (p.mode == AggMode::kMaskedSum) {
      const int64_t* __restrict mask = p.mask_arg + c * F;
      for (int64_t f = 0; f < F; ++f) out[f] += mask[f] == id ? w * xr[f] : T(0);
    } else {
#pragma omp simd
      for (int64_t f = 0; f < F; ++f) out[f] += w * xr[f];
    }
  }
}

template <typename T>
void edge_grad_row(const EdgeGradParams& p, int64_t r) {
  const int64_t F = p.num_features;
  const T* __restrict go = static_cast<const T*>(p.grad_out) + r * F;
  const T* __restrict x = static_cast<const T*>(p.x);
  T* __restrict gw = static_cast<T*>(p.grad_weight);
  const T rs = p.row_scale ? static_cast<const T*>(p.row_scale)[r] : T(1);
  for (int64_t e = p.rowptr[r]; e < p.rowptr[r + 1]; ++e) {
    const int64_t c = p.col[e];
    const T* __restrict xr = x + c * F;
    T dot = T(0);
    if (p.arg) {
      const int64_t* __restrict arg = p.arg + r * F;
      for (int64_t f = 0; f < F; ++f) dot += arg[f] == e ? go[f] * xr[f] : T(0);
    } else {
      for (int64_t f = 0; f < F; ++f) dot += go[f] * xr[f];
    }
    const T cs = p.col_scale ? static_cast<const T*>(p.col_scale)[c] : T(1);
    gw[e] = rs * cs * dot;
  }
}

// Runs body(row) over all rows, edge-balanced and dynamically scheduled.
template <typename Body>
void for_each_row(const int64_t* rowptr, int64_t num_rows, Body body) {
  const std::vector<int64_t> chunks = balanced_row_chunks(rowptr, num_rows, 16 * max_threads());
  const int64_t num_chunks = static_cast<int64_t>(chunks.size()) - 1;
#pragma omp parallel for schedule(dynamic, 1) num_threads(max_threads())
  for (int64_t k = 0; k < num_chunks; ++k) {
    for (int64_t r = chunks[k]; r < chunks[k + 1]; ++r) body(r);
  }
}

}  // namespace

void aggregate_cpu(const AggregateParams& p) {
  switch (p.dtype) {
    case DType::kFloat32:
      for_each_row(p.rowptr, p.num_rows, [&](int64_t r) { aggregate_row<float>(p, r); });
      break;
    case DType::kFloat64:
      for_each_row(p.rowptr, p.num_rows, [&](int64_t r) { aggregate_row<double>(p, r); });
      break;
    default:
      throw std::invalid_argument(std::string("aggregate on CPU supports float32 and float64, got ") +
                                  dtype_name(p.dtype));
  }
}

void edge_grad_cpu(const EdgeGradParams& p) {
  switch (p.dtype) {
    case DType::kFloat32:
      for_each_row(p.rowptr, p.num_rows, [&](int64_t r) { edge_grad_row<float>(p, r); });
      break;
    case DType::kFloat64:
      for_each_row(p.rowptr, p.num_rows, [&](int64_t r) { edge_grad_row<double>(p, r); });
      break;
    default:
      throw std::invalid_argument(std::string("edge-weight gradient on CPU supports float32 and "
                                              "float64, got ") + dtype_name(p.dtype));
  }
}

}  // namespace galfast
