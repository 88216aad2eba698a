// Shared definitions so one header can serve the C++ (OpenMP) and the CUDA build.
#pragma once

#if defined(__CUDACC__)
#define GALFAST_HD __host__ __device__ __forceinline__
#else
#define GALFAST_HD inline
#endif
