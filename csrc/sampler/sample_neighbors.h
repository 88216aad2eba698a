// Fused multi-layer neighbour sampling (GraphSAGE-style mini-batches): the contract both
// backends share. One call samples one layer (hop); Python chains the layers.
//
// For destination i (node v = dst[i]) the candidates are the in-edges of v, the CSR row
// rowptr[v] .. rowptr[v + 1] of the graph (slot t of the row is edge rowptr[v] + t, from source
// col[rowptr[v] + t]). With k = fanout (k < 0: no limit) and d the row's degree:
//   uniform  (weight == null): all d slots when d <= k, else k distinct slots drawn uniformly
//            without replacement (Floyd's algorithm: for j = d - k .. d - 1 draw t uniform in
//            [0, j]; take t, or j when t was taken before);
//   weighted (weight != null): only slots of positive weight are candidates; all of them when
//            there are at most k, else the k slots with the smallest exponential keys
//            key_t = -ln(u_t) / w_t (Efraimidis-Spirakis A-ES: each next slot is drawn with
//            probability proportional to its weight among those left), ties to the lower slot.
// The chosen slots are written in increasing order, so a destination's edges keep the graph's
// CSR order (sorted by source).
//
// Randomness: with key (seed mod 2^32, seed / 2^32), draw r of destination v (Floyd: r = j -
// (d - k); A-ES: r = t) is word r % 4 of philox4x32_10((v mod 2^32, v / 2^32, batch,
// layer * 2^26 + r / 4), key). A word x maps to [0, n) by uniform_below and to u in (0, 1) as
// (x + 1/2) / 2^32; ln is galfast's own (neg_log_unit in sample_neighbors_row.h: fma and IEEE
// division only), so a destination's sample is a pure function of (seed, batch, layer, v, graph,
// weights): identical on CPU and CUDA, for any thread count, and the same wherever v appears.
//
// Preconditions (the Python layer guarantees them; the CPU kernels check the node ids and the
// CSR they read): dst holds node ids in [0, num_nodes), batch < 2^32, layer < kMaxLayers,
// weights finite and >= 0, in-degrees below 2^32 (uniform_below takes a 32-bit bound) and, when
// weighted, below kMaxSampleDegree = 2^26 (weighted draws are numbered by row slot, and the
// counter word holds layer * 2^26 + draw / 4).
#pragma once

#include <cstdint>

#include "common/dtype.h"

namespace galfast {

constexpr int kMaxLayers = 64;
constexpr int64_t kMaxSampleDegree = int64_t(1) << 26;

struct SampleNeighborsParams {
  const int64_t* rowptr = nullptr;      // [num_nodes + 1] graph CSR by destination
  const int64_t* col = nullptr;         // [num_edges] source of each edge
  const void* weight = nullptr;         // [num_edges] (dtype weight_dtype) or null: uniform
  const int64_t* dst = nullptr;         // [num_dst] destinations of this layer
  int64_t* count = nullptr;             // count phase, out: [num_dst] edges each one gets
  const int64_t* out_rowptr = nullptr;  // sample phase: [num_dst + 1] exclusive scan of count
  int64_t* edge_id = nullptr;           // sample phase, out: [nnz] CSR position of each edge
  int64_t* src = nullptr;               // sample phase, out: [nnz] its source node
  double* key_scratch = nullptr;        // sample phase, weighted only: [nnz] workspace
  int64_t num_nodes = 0;
  int64_t num_edges = 0;
  int64_t num_dst = 0;
  int64_t fanout = -1;  // < 0: every candidate
  uint64_t seed = 0;
  uint32_t batch = 0;
  int layer = 0;
  DType weight_dtype = DType::kFloat32;  // kFloat32 or kFloat64
};

// count[i] = number of edges destination i gets (min(fanout, candidates)).
void sample_neighbors_count_cpu(const SampleNeighborsParams& p);
// Fills edge_id and src row by row (out_rowptr gives each destination's range).
void sample_neighbors_cpu(const SampleNeighborsParams& p);

// Local ids of a layer's nodes: the destinations keep 0 .. num_dst - 1, every other node gets
// the next id at its first appearance in src (positions in order).
struct RelabelParams {
  const int64_t* dst = nullptr;  // [num_dst] distinct node ids
  const int64_t* src = nullptr;  // [num_src_edges] node ids
  int64_t* node_map = nullptr;   // [num_nodes] workspace, all -1 on entry and on return
  int64_t* local = nullptr;      // out: [num_src_edges] local id of src[e]
  int64_t* nodes = nullptr;      // out: [num_dst + num_src_edges] node of each local id
  int64_t* num_local = nullptr;  // out: [1] number of local ids
  int64_t num_nodes = 0;
  int64_t num_dst = 0;
  int64_t num_src_edges = 0;
};

void relabel_cpu(const RelabelParams& p);

#ifdef GALFAST_WITH_CUDA
void sample_neighbors_count_cuda(const SampleNeighborsParams& p, void* stream);
void sample_neighbors_cuda(const SampleNeighborsParams& p, void* stream);
#endif

}  // namespace galfast
