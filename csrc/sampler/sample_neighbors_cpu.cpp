// CPU (OpenMP) neighbour sampling and relabelling. Thread mapping: destinations in chunks of
// equal work (balanced_row_chunks over the sampled counts), handed out dynamically; one thread
// draws a whole destination. Each destination's draws are its own counter-based words, so the
// thread count changes no output. The relabelling runs on one thread: it is one pass over the
// sampled edges with one random access each, as fast as the sampling that produced them.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/csr_check.h"
#include "common/parallel.h"
#include "common/prefetch.h"
#include "sampler/sample_neighbors.h"
#include "sampler/sample_neighbors_row.h"

namespace galfast {
namespace {

constexpr const char* kKernel = "sample_neighbors";
// A parallel region costs a thread wake-up, up to a scheduler time slice on a busy machine: a
// layer gets one thread per this many sampled edges (destinations, when counting), so the
// first layer of a 1,024-seed batch runs on the calling thread alone.
constexpr int64_t kWorkPerThread = 32768;

int threads_for(int64_t work) {
  return static_cast<int>(std::min<int64_t>(max_threads(), 1 + work / kWorkPerThread));
}

// Destinations ahead of the current one whose row offsets, and then whose first in-edges, are
// prefetched: a destination costs two dependent cache misses (rowptr[v], then col of its row)
// and little else, so the loop runs at the speed of memory only with several in flight.
constexpr int64_t kAheadOffsets = 16;
constexpr int64_t kAheadRow = 8;

void prefetch_ahead(const SampleNeighborsParams& p, int64_t i) {
  if (i + kAheadOffsets < p.num_dst) {
    const int64_t v = p.dst[i + kAheadOffsets];
    if (v >= 0 && v < p.num_nodes) prefetch_line(p.rowptr + v);
  }
  if (i + kAheadRow < p.num_dst) {
    const int64_t v = p.dst[i + kAheadRow];
    if (v >= 0 && v < p.num_nodes) {
      const int64_t begin = p.rowptr[v];
      if (begin >= 0 && begin < p.num_edges) prefetch_line(p.col + begin);
    }
  }
}

// Runs body(i) for i in [0, n) in chunks of about equal cost (cost_ptr: an offset array whose
// steps are the costs), on threads_for(work) threads; an exception stops the other chunks and
// is rethrown here.
template <typename Body>
void parallel_rows(const int64_t* cost_ptr, int64_t n, int64_t work, Body body) {
  const int threads = threads_for(work);
  const std::vector<int64_t> chunks = balanced_row_chunks(cost_ptr, n, 16 * threads);
  const int64_t num_chunks = static_cast<int64_t>(chunks.size()) - 1;
  ParallelErrors errors;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (int64_t k = 0; k < num_chunks; ++k) {
    errors.run([&] {
      for (int64_t i = chunks[k]; i < chunks[k + 1]; ++i) body(i);
    });
  }
  errors.rethrow();
}

// Destinations are the seeds (layer 0) or nodes sampled before, so a bad one is a bad seed.
int64_t checked_node(const SampleNeighborsParams& p, int64_t i) {
  const int64_t v = p.dst[i];
  if (v < 0 || v >= p.num_nodes) {
    throw std::invalid_argument("sample_neighbors: seeds holds " + std::to_string(v) +
                                ", which is not a node id in [0, " + std::to_string(p.num_nodes) +
                                ")");
  }
  return v;
}

template <typename Weight>
void count_typed(const SampleNeighborsParams& p, const Weight* weight) {
  ParallelErrors errors;
#pragma omp parallel for num_threads(threads_for(p.num_dst)) schedule(dynamic, 1024)
  for (int64_t i = 0; i < p.num_dst; ++i) {
    errors.run([&] {
      if (i + kAheadOffsets < p.num_dst) {
        const int64_t ahead = p.dst[i + kAheadOffsets];
        if (ahead >= 0 && ahead < p.num_nodes) prefetch_line(p.rowptr + ahead);
      }
      const int64_t v = checked_node(p, i);
      const EdgeRange r = checked_range(kKernel, "rowptr", p.rowptr, v, p.num_edges);
      p.count[i] = sampled_count(p, weight, r.begin, r.end);
    });
  }
  errors.rethrow();
}

template <typename Weight>
void sample_typed(const SampleNeighborsParams& p, const Weight* weight) {
  const int64_t nnz = p.out_rowptr[p.num_dst];
  checked_rows(kKernel, "out_rowptr", p.out_rowptr, 0, p.num_dst, nnz);
  auto body = [&](int64_t i) {
    prefetch_ahead(p, i);
    const int64_t v = checked_node(p, i);
    const EdgeRange r = checked_range(kKernel, "rowptr", p.rowptr, v, p.num_edges);
    const int64_t n_out = p.out_rowptr[i + 1] - p.out_rowptr[i];
    if (n_out != sampled_count(p, weight, r.begin, r.end)) {
      throw std::invalid_argument(std::string(kKernel) + ": destination " + std::to_string(i) +
                                  " has room for " + std::to_string(n_out) +
                                  " edges, not its sampled count (out_rowptr is stale)");
    }
    check_indices(kKernel, "col", p.col, r.begin, r.end, p.num_nodes);
    sample_destination(p, weight, v, r.begin, r.end, i);
  };
  parallel_rows(p.out_rowptr, p.num_dst, nnz, body);
}

template <typename Run>
void with_weight_type(const SampleNeighborsParams& p, Run run) {
  if (p.weight != nullptr && p.weight_dtype == DType::kFloat64) {
    run(static_cast<const double*>(p.weight));
  } else {
    run(static_cast<const float*>(p.weight));
  }
}

}  // namespace

void sample_neighbors_count_cpu(const SampleNeighborsParams& p) {
  with_weight_type(p, [&](auto weight) { count_typed(p, weight); });
}

void sample_neighbors_cpu(const SampleNeighborsParams& p) {
  with_weight_type(p, [&](auto weight) { sample_typed(p, weight); });
}

void relabel_cpu(const RelabelParams& p) {
  int64_t next = 0;
  // Restores node_map's entries for the first `assigned` local ids, on success and on error.
  auto reset = [&](int64_t assigned) {
    for (int64_t k = 0; k < assigned; ++k) p.node_map[p.nodes[k]] = -1;
  };
  auto assign = [&](int64_t v, const char* name, int64_t at) {
    if (v < 0 || v >= p.num_nodes) {
      reset(next);
      throw_bad_index("relabel", name, at, v, p.num_nodes);
    }
    int64_t& slot = p.node_map[v];
    if (slot < 0) {
      slot = next;
      p.nodes[next++] = v;
    }
    return slot;
  };
  for (int64_t i = 0; i < p.num_dst; ++i) {
    if (assign(p.dst[i], "dst", i) != i) {
      reset(next);
      throw std::invalid_argument("sample_neighbors: seeds holds node " + std::to_string(p.dst[i]) +
                                  " twice; the destinations of a block must be distinct");
    }
  }
  constexpr int64_t kAhead = 16;  // node_map reads are random: keep several in flight
  for (int64_t e = 0; e < p.num_src_edges; ++e) {
    if (e + kAhead < p.num_src_edges) {
      const int64_t ahead = p.src[e + kAhead];
      if (ahead >= 0 && ahead < p.num_nodes) prefetch_line(p.node_map + ahead);
    }
    p.local[e] = assign(p.src[e], "src", e);
  }
  reset(next);
  *p.num_local = next;
}

}  // namespace galfast
