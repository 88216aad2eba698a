// Launch checking for the CUDA kernels: every launch is followed by GALFAST_CHECK_LAUNCH.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace galfast {

// gridDim.x of a one-dimensional launch: `blocks` checked against CUDA's limit (2^31 - 1), so a
// huge input is a clear error instead of a grid silently cut to its low 32 bits.
inline unsigned grid_size(int64_t blocks, const char* kernel) {
  constexpr int64_t kMaxGrid = 2147483647;
  if (blocks < 0 || blocks > kMaxGrid) {
    throw std::invalid_argument(std::string("galfast: ") + kernel + " needs " +
                                std::to_string(blocks) + " blocks, more than CUDA's " +
                                std::to_string(kMaxGrid) + "; split the input");
  }
  return static_cast<unsigned>(blocks);
}

}  // namespace galfast

#define GALFAST_CHECK_LAUNCH(what)                                              \
  do {                                                                          \
    const cudaError_t galfast_err_ = cudaGetLastError();                        \
    if (galfast_err_ != cudaSuccess)                                            \
      throw std::runtime_error(std::string("galfast: launching ") + (what) +    \
                               " failed: " + cudaGetErrorString(galfast_err_)); \
  } while (0)
