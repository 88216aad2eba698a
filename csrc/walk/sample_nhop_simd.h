// The vector builds of the hop-major block walks (sample_nhop_lanes.h): AVX-512
// (sample_nhop_avx512.cpp) for x86-64 CPUs with AVX-512F/BW/DQ/VL, AVX2
// (sample_nhop_avx2_walk.cpp) for the others with AVX2; sample_nhop_cpu.cpp chooses at run time.
#pragma once

#include <atomic>
#include <cstdint>

#include "walk/sample_nhop.h"
#include "walk/sample_nhop_row.h"

namespace galfast {

// The widest walks int32 paper and simple walks may take where the CPU has them (kAvx512
// unless a test narrows it to check the narrower builds on the same machine).
enum class NhopIsa : int { kBaseline = 0, kAvx2 = 1, kAvx512 = 2 };
std::atomic<NhopIsa>& nhop_widest_isa();

#if defined(GALFAST_X86_DISPATCH)
// Each namespace: whether the CPU has the instructions, and the walks of [begin, end) of the
// batch in paper or simple mode; false where a start lies outside [0, num_nodes) (the walks of
// its block and after are not written).
namespace avx512 {
bool supported();
bool walk_blocks(const SampleNhopParams& p, const WalkGraph<int32_t>& g, int64_t begin, int64_t end,
                 bool offsets_cached);
}  // namespace avx512

namespace avx2 {
bool supported();
bool walk_blocks(const SampleNhopParams& p, const WalkGraph<int32_t>& g, int64_t begin, int64_t end,
                 bool offsets_cached);
}  // namespace avx2
#endif

}  // namespace galfast
