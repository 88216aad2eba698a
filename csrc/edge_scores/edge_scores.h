// GC-MC's bilinear rating decoder on a batch of edges, fused: the contract of the CPU kernels.
//
//   u_b = z[src[b]], v_b = z[dst[b]]                                     b in [0, num_edges)
//   h[b, s]   = u_b^T bases[s] v_b                                       s in [0, num_bases)
//   out[b, r] = sum over s of coefficients[r, s] * h[b, s]               r in [0, num_levels)
//
// The backward, given grad_out = dL/dout:
//
//   dh[b, s]                 = sum over r of grad_out[b, r] * coefficients[r, s]
//   du_b                     = sum over s of dh[b, s] * bases[s] v_b
//   dv_b                     = sum over s of dh[b, s] * bases[s]^T u_b
//   grad_z[n]                = sum over b with src[b] == n of du_b  +  (dst[b] == n) dv_b
//   grad_bases[s]            = sum over b of dh[b, s] * u_b v_b^T
//   grad_coefficients[r, s]  = sum over b of grad_out[b, r] * h[b, s]
//
// Determinism: per-edge values are computed by the same instructions whichever thread runs the
// edge; the sums over edges of grad_bases and grad_coefficients are taken per fixed-size chunk
// of edges (kEdgeScoresChunk, in edge order) and the chunks' partial sums added in chunk order;
// each row of grad_z is summed by one thread in edge order (for each edge, its src term before
// its dst term). Every result is therefore bitwise independent of the thread count.
//
// Layout: out and grad_out are [num_levels, num_edges] (a level's scores of consecutive edges are
// contiguous, as the edges-in-lanes kernel writes them and the loss reads them).
//
// Ids must lie in [0, num_nodes): both kernels throw std::out_of_range (IndexError in Python)
// naming the first bad one they meet (negative ids do not wrap). dim must be at most
// edge_scores_max_dim(dtype); larger embeddings run the torch composition in Python.
#pragma once

#include <cstdint>

#include "common/dtype.h"

namespace galfast {

// Edges per partial sum of the parameter gradients (a constant: the results must not depend on
// how the edges are spread over threads).
constexpr int64_t kEdgeScoresChunk = 128;
// The same for the edges-in-lanes kernel (edge_scores_avx512.cpp): 32 blocks of 16 edges, so that
// each grad_bases accumulator's lanes are summed once per 512 edges.
constexpr int64_t kEdgeScoresLanesChunk = 512;

struct EdgeScoresParams {
  const void* z = nullptr;             // [num_nodes, dim]
  const void* src = nullptr;           // [num_edges], int64 or (int32_ids) int32
  const void* dst = nullptr;           // [num_edges], same type as src
  const void* bases = nullptr;         // [num_bases, dim, dim]
  const void* coefficients = nullptr;  // [num_levels, num_bases]
  void* out = nullptr;                 // forward: [num_levels, num_edges]
  // Forward (written unless null), backward (read): the rows u_b^T bases[s]. Without
  // edges_in_lanes [num_edges, num_bases, padded dim], zero-padded to
  // edge_scores_padded_dim(dtype, dim); with it [ceil(num_edges / 16), num_bases, dim, 16], the
  // element j of 16 consecutive edges' rows side by side.
  void* projected = nullptr;
  const void* grad_out = nullptr;     // backward: [num_levels, num_edges]
  void* grad_z = nullptr;             // backward: [num_nodes, dim]
  void* grad_bases = nullptr;         // backward: [num_bases, dim, dim]
  void* grad_coefficients = nullptr;  // backward: [num_levels, num_bases]
  int64_t num_nodes = 0;
  int64_t num_edges = 0;
  int64_t dim = 0;         // D >= 1
  int64_t num_bases = 0;   // S >= 1
  int64_t num_levels = 0;  // R >= 1
  bool int32_ids = false;
  // Run the edges-in-lanes kernel (edge_scores_avx512.h): float32, dim <= 64, AVX-512F/DQ/VL.
  bool edges_in_lanes = false;
  DType dtype = DType::kFloat32;
};

// Threads for a call: one below 2^16 multiply-adds (num_edges * num_bases * dim^2), where a
// parallel region costs more than it saves; else all. Shared by every CPU build (defined in the
// baseline one, edge_scores_cpu.cpp).
int edge_scores_threads(const EdgeScoresParams& p);

// Throws std::out_of_range for the bad id value = which[b] of a graph of num_nodes nodes.
[[noreturn]] void throw_bad_edge_id(const char* which, int64_t b, int64_t value, int64_t num_nodes);

// The largest dim the CPU kernels take for a dtype (8 vectors of 32 bytes: 64 floats, 32
// doubles; the per-edge rows are kept in registers).
int64_t edge_scores_max_dim(DType dtype);

// dim rounded up to whole 32-byte vectors: the row length of projected.
int64_t edge_scores_padded_dim(DType dtype, int64_t dim);

void edge_scores_cpu(const EdgeScoresParams& p);
void edge_scores_backward_cpu(const EdgeScoresParams& p);

}  // namespace galfast
