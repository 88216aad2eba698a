// The AVX-512 build of the CPU sum aggregation (aggregate_sum_avx512.cpp), for x86-64 CPUs with
// AVX-512F/VL; aggregate_cpu.cpp chooses it at run time for float32 sums read through int32
// indices (what Python passes on CPU), and the AVX2 build for everything else.
#pragma once

#include <atomic>

#include "aggregate/aggregate.h"

namespace galfast {

// Whether the float32 sums may take the AVX-512 kernel where the CPU has it (true unless a
// test turns it off to compare it with the AVX2 kernel on the same machine).
std::atomic<bool>& aggregate_simd_allowed();

#if defined(GALFAST_X86_DISPATCH)
namespace aggregate512 {

bool supported();

// Whether this kernel computes the call: a float32 sum (sum, mean, gcn) of at least 4 features
// with col32 given.
bool handles(const AggregateParams& p);

// The call's sums, bitwise those of the AVX2 kernel.
void sum(const AggregateParams& p);

}  // namespace aggregate512
#endif

}  // namespace galfast
