// The AVX-512 build of the hop-major block walks (sample_nhop_avx512.cpp), for x86-64 CPUs
// that have AVX-512F/BW/DQ/VL; sample_nhop_cpu.cpp chooses it at run time.
#pragma once

#include <atomic>
#include <cstdint>

#include "walk/sample_nhop.h"
#include "walk/sample_nhop_row.h"

namespace galfast {

// Whether int32 paper and simple walks may take the AVX-512 path where the CPU has it (true
// unless a test turns it off to check the baseline kernel on the same machine).
std::atomic<bool>& nhop_simd_allowed();

#if defined(GALFAST_X86_DISPATCH)
namespace avx512 {

bool supported();

// Walks [begin, end) of the batch in paper or simple mode; false where a start lies outside
// [0, num_nodes) (the walks of its block and after are not written).
bool walk_blocks(const SampleNhopParams& p, const WalkGraph<int32_t>& g, int64_t begin, int64_t end,
                 bool offsets_cached);

}  // namespace avx512
#endif

}  // namespace galfast
