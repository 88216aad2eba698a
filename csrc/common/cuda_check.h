// Launch checking for the CUDA kernels: every launch is followed by GALFAST_CHECK_LAUNCH.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#define GALFAST_CHECK_LAUNCH(what)                                              \
  do {                                                                          \
    const cudaError_t galfast_err_ = cudaGetLastError();                        \
    if (galfast_err_ != cudaSuccess)                                            \
      throw std::runtime_error(std::string("galfast: launching ") + (what) +    \
                               " failed: " + cudaGetErrorString(galfast_err_)); \
  } while (0)
