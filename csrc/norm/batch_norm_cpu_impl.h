// CPU (OpenMP) batch normalisation kernels, compiled once per instruction set: batch_norm_cpu.cpp
// includes this file for the baseline ISA and batch_norm_cpu_avx2.cpp for AVX2+FMA, each with
// GALFAST_CPU_ISA naming its namespace.
//
// Thread mapping: the N rows are cut into chunks of Layout::R rows (a function of C alone, never
// of the thread count), handed out statically, one thread per chunk. Reductions: each chunk
// sums into a thread's [P] accumulators (lane j of a block of k rows is channel j mod C), folds
// them into its own per-channel partial slot (in double), and one thread then combines the
// slots in chunk order. Elementwise passes: each chunk's elements are written by one thread.
// Every sum is taken in an order fixed by N and C alone: the results are bitwise the same for
// any thread count.
#pragma once

#ifndef GALFAST_CPU_ISA
#error "define GALFAST_CPU_ISA before including batch_norm_cpu_impl.h"
#endif

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/parallel.h"
#include "norm/batch_norm.h"

namespace galfast {
namespace GALFAST_CPU_ISA {
namespace {

// Lanes of a register tile: the reductions keep kTile double accumulators in registers (8 AVX2
// vectors) while the blocks of a chunk stream by; the backward's two sums use half as many
// lanes each.
constexpr int kTile = 32;
// Elements per chunk: 32 KiB of float32, so the two passes of a chunk's statistics read it
// from L1/L2, and few enough chunks that combining their partials stays a small serial tail.
constexpr int64_t kChunkElements = 8192;

// How the rows are grouped. A block is k consecutive rows, P = k C elements with P a multiple
// of kTile (k <= kTile), read as flat lanes: lane j of every block is channel j mod C, so a
// register tile of lanes [t, t + kTile) sums its lanes over a chunk's blocks with no per-row
// loop (with C = 20 a per-row loop spent more time in loop control and vector tails than in
// arithmetic). Per-channel coefficients are replicated k times to match. A chunk is a whole
// number of blocks; only the last chunk may end in a partial block.
struct Layout {
  int64_t C, k, P, R;
  explicit Layout(int64_t channels) : C(channels), k(1) {
    while ((k * C) % kTile != 0) ++k;
    P = k * C;
    R = k * std::max<int64_t>(1, kChunkElements / P);
  }
  int64_t chunks(int64_t num_rows) const { return (num_rows + R - 1) / R; }
  int threads(int64_t num_rows) const {
    return static_cast<int>(
        std::max<int64_t>(1, std::min<int64_t>(max_threads(), chunks(num_rows))));
  }
};

// Runs body(thread, k, first_element, num_elements) for every chunk k of the rows (elements
// counted flat); chunks statically spread over `threads` threads, no parallel region at all
// for one. The bodies throw nothing.
template <typename Body>
void for_each_chunk(const Layout& l, int64_t num_rows, int threads, Body body) {
  const int64_t chunks = l.chunks(num_rows);
  const auto run = [&](int thread, int64_t k) {
    const int64_t first = k * l.R;
    body(thread, k, first * l.C, std::min(l.R, num_rows - first) * l.C);
  };
  if (threads <= 1) {
    for (int64_t k = 0; k < chunks; ++k) run(0, k);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
#ifdef _OPENMP
    const int thread = omp_get_thread_num();
#else
    const int thread = 0;
#endif
#pragma omp for schedule(static)
    for (int64_t k = 0; k < chunks; ++k) run(thread, k);
  }
}

// out[c] = sum over the k replicas of lanes[i C + c], in replica order.
void fold(const Layout& l, const double* __restrict lanes, double* __restrict out) {
  std::copy(lanes, lanes + l.C, out);
  for (int64_t i = 1; i < l.k; ++i) {
    for (int64_t c = 0; c < l.C; ++c) out[c] += lanes[i * l.C + c];
  }
}

// out[i C + c] = v[c] for the k replicas, converted to U.
template <typename U>
void replicate(const Layout& l, const double* __restrict v, U* __restrict out) {
  for (int64_t i = 0; i < l.k; ++i) {
    for (int64_t c = 0; c < l.C; ++c) out[i * l.C + c] = static_cast<U>(v[c]);
  }
}

// lanes[j] = sum over the `count` flat elements at x whose offset is j mod P of
// term(x value, j): each register tile of lanes runs over the full blocks in order, then the
// partial block's elements are added in order.
template <int kWidth, typename T, typename Term>
[[gnu::always_inline]] inline void lane_sums(const Layout& l, const T* __restrict x, int64_t count,
                                             double* __restrict lanes, Term term) {
  const int64_t blocks = count / l.P;
  for (int64_t t = 0; t < l.P; t += kWidth) {
    double acc[kWidth] = {};
    for (int64_t b = 0; b < blocks; ++b) {
      const T* __restrict in = x + b * l.P + t;
      for (int j = 0; j < kWidth; ++j) acc[j] += term(static_cast<double>(in[j]), t + j);
    }
    for (int j = 0; j < kWidth; ++j) lanes[t + j] = acc[j];
  }
  const T* __restrict rest = x + blocks * l.P;
  for (int64_t j = 0; j < count - blocks * l.P; ++j) {
    lanes[j] += term(static_cast<double>(rest[j]), j);
  }
}

// A chunk's own mean and centred sum of squares per channel, by two passes over the chunk
// (in cache). scratch is [2 P].
template <typename T>
void chunk_moments(const Layout& l, const T* __restrict x, int64_t count,
                   double* __restrict scratch, double* __restrict mean, double* __restrict m2) {
  double* __restrict lanes = scratch;
  double* __restrict rep = scratch + l.P;
  lane_sums<kTile>(l, x, count, lanes, [](double v, int64_t) { return v; });
  fold(l, lanes, mean);
  const double inv_rows = static_cast<double>(l.C) / static_cast<double>(count);
  for (int64_t c = 0; c < l.C; ++c) mean[c] *= inv_rows;
  replicate(l, mean, rep);
  lane_sums<kTile>(l, x, count, lanes, [rep](double v, int64_t j) {
    const double d = v - rep[j];
    return d * d;
  });
  fold(l, lanes, m2);
}

// Runs elementwise(offset, n) over a chunk's `count` elements in spans of at most P starting
// on block boundaries (lane j of a span is channel j mod C).
template <typename Span>
[[gnu::always_inline]] inline void for_each_block(const Layout& l, int64_t count, Span span) {
  for (int64_t off = 0; off < count; off += l.P) span(off, std::min(l.P, count - off));
}

template <typename T>
void forward(const BatchNormParams& p) {
  const int64_t N = p.num_rows, C = p.num_channels;
  const Layout l(C);
  const int64_t chunks = l.chunks(N);
  const int threads = l.threads(N);
  const T* x = static_cast<const T*>(p.x);
  // Per chunk: its mean [C] then its centred sum of squares [C]; per thread: [2 P] scratch.
  std::vector<double> partial(static_cast<size_t>(chunks * 2 * C));
  std::vector<double> scratch(static_cast<size_t>(threads * 2 * l.P));
  for_each_chunk(l, N, threads, [&](int thread, int64_t k, int64_t first, int64_t count) {
    double* slot = partial.data() + k * 2 * C;
    chunk_moments(l, x + first, count, scratch.data() + thread * 2 * l.P, slot, slot + C);
  });
  // Chan et al.: M2 = sum_k M2_k + n_k (mean_k - mean)^2, in chunk order.
  double* mean = p.stats;
  double* var = p.stats + C;
  std::fill(mean, mean + C, 0.0);
  std::fill(var, var + C, 0.0);
  const auto rows_of = [&](int64_t k) { return static_cast<double>(std::min(l.R, N - k * l.R)); };
  for (int64_t k = 0; k < chunks; ++k) {
    const double* slot = partial.data() + k * 2 * C;
    for (int64_t c = 0; c < C; ++c) mean[c] += rows_of(k) * slot[c];
  }
  const double inv_n = 1.0 / static_cast<double>(N);
  for (int64_t c = 0; c < C; ++c) mean[c] *= inv_n;
  for (int64_t k = 0; k < chunks; ++k) {
    const double* slot = partial.data() + k * 2 * C;
    for (int64_t c = 0; c < C; ++c) {
      const double d = slot[c] - mean[c];
      var[c] += slot[C + c] + rows_of(k) * d * d;
    }
  }
  // y = (x - mean) scale + shift in T, as torch computes it; scale = invstd weight and
  // shift = bias are computed in double and rounded once, then replicated to [P].
  std::vector<double> coef(static_cast<size_t>(3 * C));
  const T* weight = static_cast<const T*>(p.weight);
  const T* bias = static_cast<const T*>(p.bias);
  for (int64_t c = 0; c < C; ++c) {
    var[c] *= inv_n;
    const double invstd = 1.0 / std::sqrt(var[c] + p.eps);
    coef[c] = mean[c];
    coef[C + c] = weight ? invstd * static_cast<double>(weight[c]) : invstd;
    coef[2 * C + c] = bias ? static_cast<double>(bias[c]) : 0.0;
  }
  std::vector<T> rep(static_cast<size_t>(3 * l.P));
  for (int64_t i = 0; i < 3; ++i) replicate(l, coef.data() + i * C, rep.data() + i * l.P);
  T* y = static_cast<T*>(p.y);
  for_each_chunk(l, N, threads, [&](int, int64_t, int64_t first, int64_t count) {
    const T* __restrict m = rep.data();
    const T* __restrict a = m + l.P;
    const T* __restrict b = a + l.P;
    for_each_block(l, count, [&](int64_t off, int64_t n) {
      const T* __restrict in = x + first + off;
      T* __restrict out = y + first + off;
      for (int64_t j = 0; j < n; ++j) out[j] = (in[j] - m[j]) * a[j] + b[j];
    });
  });
}

template <typename T>
void backward(const BatchNormBackwardParams& p) {
  const int64_t N = p.num_rows, C = p.num_channels;
  const Layout l(C);
  const int64_t chunks = l.chunks(N);
  const int threads = l.threads(N);
  const T* x = static_cast<const T*>(p.x);
  const T* g = static_cast<const T*>(p.grad_y);
  const double* mean = p.stats;
  const double* var = p.stats + C;
  std::vector<double> mean_rep(static_cast<size_t>(l.P));
  replicate(l, mean, mean_rep.data());
  // Per chunk: sum g [C] then sum g (x - mean) [C]; per thread: [2 P] scratch.
  std::vector<double> partial(static_cast<size_t>(chunks * 2 * C));
  std::vector<double> scratch(static_cast<size_t>(threads * 2 * l.P));
  for_each_chunk(l, N, threads, [&](int thread, int64_t k, int64_t first, int64_t count) {
    double* __restrict lanes_g = scratch.data() + thread * 2 * l.P;
    double* __restrict lanes_gx = lanes_g + l.P;
    const double* __restrict m = mean_rep.data();
    const T* __restrict xs = x + first;
    // Two register tiles side by side: the sums of g and of g (x - mean) over the same lanes.
    const int64_t blocks = count / l.P;
    constexpr int kWidth = kTile / 2;
    for (int64_t t = 0; t < l.P; t += kWidth) {
      double acc_g[kWidth] = {}, acc_gx[kWidth] = {};
      for (int64_t b = 0; b < blocks; ++b) {
        const T* __restrict xb = xs + b * l.P + t;
        const T* __restrict gb = g + first + b * l.P + t;
        for (int j = 0; j < kWidth; ++j) {
          const double gv = static_cast<double>(gb[j]);
          acc_g[j] += gv;
          acc_gx[j] += gv * (static_cast<double>(xb[j]) - m[t + j]);
        }
      }
      for (int j = 0; j < kWidth; ++j) lanes_g[t + j] = acc_g[j], lanes_gx[t + j] = acc_gx[j];
    }
    for (int64_t j = 0; j < count - blocks * l.P; ++j) {
      const double gv = static_cast<double>(g[first + blocks * l.P + j]);
      lanes_g[j] += gv;
      lanes_gx[j] += gv * (static_cast<double>(xs[blocks * l.P + j]) - m[j]);
    }
    double* slot = partial.data() + k * 2 * C;
    fold(l, lanes_g, slot);
    fold(l, lanes_gx, slot + C);
  });
  std::vector<double> sums(static_cast<size_t>(2 * C), 0.0);  // sum g, sum g (x - mean)
  for (int64_t k = 0; k < chunks; ++k) {
    const double* slot = partial.data() + k * 2 * C;
    for (int64_t c = 0; c < 2 * C; ++c) sums[c] += slot[c];
  }
  const T* weight = static_cast<const T*>(p.weight);
  T* grad_weight = static_cast<T*>(p.grad_weight);
  T* grad_bias = static_cast<T*>(p.grad_bias);
  const double inv_n = 1.0 / static_cast<double>(N);
  // grad_x = (g - mean_g - (x - mean) slope) scale in T, as torch computes it, with
  // slope = invstd^2 sum g (x - mean) / N and scale = weight invstd (in double, rounded once).
  std::vector<double> coef(static_cast<size_t>(4 * C));
  for (int64_t c = 0; c < C; ++c) {
    const double invstd = 1.0 / std::sqrt(var[c] + p.eps);
    if (grad_weight) grad_weight[c] = static_cast<T>(sums[C + c] * invstd);
    if (grad_bias) grad_bias[c] = static_cast<T>(sums[c]);
    coef[c] = mean[c];
    coef[C + c] = sums[c] * inv_n;
    coef[2 * C + c] = invstd * invstd * sums[C + c] * inv_n;
    coef[3 * C + c] = weight ? invstd * static_cast<double>(weight[c]) : invstd;
  }
  T* grad_x = static_cast<T*>(p.grad_x);
  if (!grad_x) return;
  std::vector<T> rep(static_cast<size_t>(4 * l.P));
  for (int64_t i = 0; i < 4; ++i) replicate(l, coef.data() + i * C, rep.data() + i * l.P);
  for_each_chunk(l, N, threads, [&](int, int64_t, int64_t first, int64_t count) {
    const T* __restrict m = rep.data();
    const T* __restrict mg = m + l.P;
    const T* __restrict slope = mg + l.P;
    const T* __restrict a = slope + l.P;
    for_each_block(l, count, [&](int64_t off, int64_t n) {
      const T* __restrict xs = x + first + off;
      const T* __restrict gs = g + first + off;
      T* __restrict out = grad_x + first + off;
      for (int64_t j = 0; j < n; ++j) {
        out[j] = (gs[j] - mg[j] - (xs[j] - m[j]) * slope[j]) * a[j];
      }
    });
  });
}

template <typename T>
void update_running(const BatchNormRunningParams& p) {
  const int64_t C = p.num_channels;
  const double m = p.momentum;
  const double unbias = static_cast<double>(p.num_rows) / static_cast<double>(p.num_rows - 1);
  T* running_mean = static_cast<T*>(p.running_mean);
  T* running_var = static_cast<T*>(p.running_var);
  for (int64_t c = 0; c < C; ++c) {
    if (running_mean) {
      running_mean[c] =
          static_cast<T>(m * p.stats[c] + (1 - m) * static_cast<double>(running_mean[c]));
    }
    if (running_var) {
      running_var[c] = static_cast<T>(m * (p.stats[C + c] * unbias) +
                                      (1 - m) * static_cast<double>(running_var[c]));
    }
  }
}

}  // namespace

void batch_norm(const BatchNormParams& p) {
  if (p.num_channels == 0) return;
  dispatch_dtype(p.dtype, "batch_norm", [&](auto tag) { forward<decltype(tag)>(p); });
}

void batch_norm_backward(const BatchNormBackwardParams& p) {
  if (p.num_channels == 0) return;
  dispatch_dtype(p.dtype, "batch_norm", [&](auto tag) { backward<decltype(tag)>(p); });
}

void batch_norm_update_running(const BatchNormRunningParams& p) {
  dispatch_dtype(p.dtype, "batch_norm", [&](auto tag) { update_running<decltype(tag)>(p); });
}

}  // namespace GALFAST_CPU_ISA
}  // namespace galfast
