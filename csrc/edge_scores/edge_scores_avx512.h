// The float32 fused bilinear edge scores with 16 edges in the 16 lanes of a 64-byte vector
// (edge_scores_avx512.cpp), for x86-64 CPUs with AVX-512F/DQ/VL. Python chooses it per forward call
// (edge_scores_edges_in_lanes) and marks the call with EdgeScoresParams::edges_in_lanes; the
// backward follows the forward's choice, since it reads the forward's projected rows in that
// kernel's layout.
#pragma once

#include <atomic>
#include <cstdint>

#include "edge_scores/edge_scores.h"

namespace galfast {

// Whether a forward may take the edges-in-lanes kernel where the CPU has it (true unless a test
// turns it off to compare it with the AVX2 kernel on the same machine).
std::atomic<bool>& edge_scores_simd_allowed();

// Whether this CPU runs the edges-in-lanes kernel for this dtype and dim (float32, dim <= 64).
bool edge_scores_lanes_supported(DType dtype, int64_t dim);

// Whether a forward of this dtype and dim takes it now: supported and allowed.
bool edge_scores_edges_in_lanes(DType dtype, int64_t dim);

// The kernels (edge_scores.h's contract, projected in the lanes layout); they throw
// std::invalid_argument where edge_scores_lanes_supported is false.
void edge_scores_lanes(const EdgeScoresParams& p);
void edge_scores_lanes_backward(const EdgeScoresParams& p);

}  // namespace galfast
