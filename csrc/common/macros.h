// Shared definitions so one header can serve the C++ (OpenMP) and the CUDA build.
#pragma once

#if defined(__CUDACC__)
#define GALFAST_HD __host__ __device__ __forceinline__
#else
// Always inlined on the host: these headers are compiled into both the baseline and the AVX2
// translation units, and an out-of-line copy of either could be picked for both by the linker.
#define GALFAST_HD inline __attribute__((always_inline))
#endif
