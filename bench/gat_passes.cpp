// Times the CPU GAT kernels pass by pass (driven by bench/gat_backward_passes.py): the
// forward, the whole backward, then each backward pass alone, on a graph the driver dumps,
// with random inputs, through the AVX2 build of csrc/gat/gat_cpu_impl.h. time_passes() names
// this kernel version's passes: to time another commit's kernel, run that commit's copy of
// this file and its driver. Prints "name process_cpu_ms wall_ms" per timing, each the minimum
// over the rounds.
#define GALFAST_CPU_ISA avx2
#include <time.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "gat/gat_cpu_impl.h"

namespace {

using galfast::GatBackwardParams;
using galfast::GatParams;

double now(clockid_t clock) {
  timespec t;
  clock_gettime(clock, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

struct Best {
  double cpu = 1e300, wall = 1e300;
};

template <typename Work>
void measure(const char* name, int rounds, Work work) {
  Best best;
  work();  // warm-up
  for (int r = 0; r < rounds; ++r) {
    const double c0 = now(CLOCK_PROCESS_CPUTIME_ID), w0 = now(CLOCK_MONOTONIC);
    work();
    const double c1 = now(CLOCK_PROCESS_CPUTIME_ID), w1 = now(CLOCK_MONOTONIC);
    best.cpu = std::min(best.cpu, c1 - c0);
    best.wall = std::min(best.wall, w1 - w0);
  }
  std::printf("%s %.4f %.4f\n", name, best.cpu, best.wall);
  std::fflush(stdout);
}

std::vector<int64_t> read_index(const std::string& path, int64_t count) {
  std::vector<int64_t> v(count);
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(v.data()), count * sizeof(int64_t));
  if (!in) throw std::runtime_error("cannot read " + path);
  return v;
}

std::vector<float> randn(int64_t count, std::mt19937& gen) {
  std::normal_distribution<float> normal;
  std::vector<float> v(count);
  for (float& x : v) x = normal(gen);
  return v;
}

// The backward's passes of this kernel version, each alone (as backward_passes runs them).
template <int kHeads>
void time_passes_for(const galfast::GatBackwardParams& p, int rounds) {
  using namespace galfast;
  using namespace galfast::avx2;
  const AttentionDropout drop(p.dropout, p.seed);
  const auto none = [](int64_t, int64_t) {};
  std::vector<float> terms(p.num_rows * 3 * p.heads);
  const int64_t width =
      kHeadsAtOnce<float, kHeads> ? feature_major_width<float>(p.heads, p.features) : 0;
  std::vector<float> rows_fm(p.num_rows * width);
  measure("pass_delta", rounds, [&] {
    for_each_row(p.rowptr, p.num_rows, none, [&](int64_t i) {
      backward_delta_row<float, kHeads>(p, terms.data(), rows_fm.data(), i);
    });
  });
  measure("pass_columns", rounds, [&] {
    for_each_row(p.colptr, p.num_cols, none, [&](int64_t j) {
      backward_col<float, kHeads>(p, drop, terms.data(), rows_fm.data(), j);
    });
  });
  measure("pass_dst_rows", rounds, [&] {
    for_each_row(p.rowptr, p.num_rows, none,
                 [&](int64_t i) { backward_dst_row<float, kHeads>(p, i); });
  });
}

void time_passes(const galfast::GatBackwardParams& p, int rounds) {
  switch (p.heads) {
    case 1:
      return time_passes_for<1>(p, rounds);
    case 2:
      return time_passes_for<2>(p, rounds);
    case 4:
      return time_passes_for<4>(p, rounds);
    case 8:
      return time_passes_for<8>(p, rounds);
    default:
      return time_passes_for<0>(p, rounds);
  }
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: gat_passes GRAPH_DIR NUM_NODES NUM_EDGES HEADS FEATURES\n");
    return 2;
  }
  const std::string dir = argv[1];
  const int64_t n = std::stoll(argv[2]), nnz = std::stoll(argv[3]);
  const int64_t H = std::stoll(argv[4]), F = std::stoll(argv[5]);
  const int rounds = std::getenv("ROUNDS") ? std::atoi(std::getenv("ROUNDS")) : 10;
  const auto rowptr = read_index(dir + "/rowptr", n + 1), col = read_index(dir + "/col", nnz);
  const auto colptr = read_index(dir + "/colptr", n + 1);
  const auto csc_row = read_index(dir + "/csc_row", nnz);
  const auto csc_edge_id = read_index(dir + "/csc_edge_id", nnz);
  const auto csr_to_csc = read_index(dir + "/csr_to_csc", nnz);
  std::mt19937 gen(0);
  const auto h = randn(n * H * F, gen), a_src = randn(n * H, gen), a_dst = randn(n * H, gen);
  const auto grad_out = randn(n * H * F, gen);
  std::vector<float> out(n * H * F), lse(n * H), delta(n * H), edge_grad(nnz * H);
  std::vector<float> grad_h(n * H * F), grad_src(n * H), grad_dst(n * H);

  GatParams f;
  f.rowptr = rowptr.data(), f.col = col.data(), f.h = h.data();
  f.alpha_src = a_src.data(), f.alpha_dst = a_dst.data(), f.out = out.data(), f.lse = lse.data();
  f.num_edges = nnz, f.num_rows = n, f.num_cols = n, f.heads = H, f.features = F;
  GatBackwardParams b;
  b.rowptr = rowptr.data(), b.col = col.data(), b.colptr = colptr.data();
  b.csc_row = csc_row.data(), b.csc_edge_id = csc_edge_id.data(), b.csr_to_csc = csr_to_csc.data();
  b.h = h.data(), b.alpha_src = a_src.data(), b.alpha_dst = a_dst.data();
  b.out = out.data(), b.lse = lse.data(), b.grad_out = grad_out.data(), b.delta = delta.data();
  b.edge_grad = edge_grad.data(), b.grad_h = grad_h.data();
  b.grad_alpha_src = grad_src.data(), b.grad_alpha_dst = grad_dst.data();
  b.num_edges = nnz, b.num_rows = n, b.num_cols = n, b.heads = H, b.features = F;

  measure("forward", rounds, [&] { galfast::avx2::gat_forward(f); });
  measure("backward", rounds, [&] { galfast::avx2::gat_backward(b); });
  time_passes(b, rounds);
  return 0;
}
