// Element-type conversions for CUDA kernels: low-precision inputs accumulate in float32.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "common/dtype.h"

namespace galfast {

template <typename T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

__device__ __forceinline__ float to_acc(float v) { return v; }
__device__ __forceinline__ double to_acc(double v) { return v; }
__device__ __forceinline__ float to_acc(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_acc(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T from_acc(acc_t<T> v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half(v);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16(v);
  } else {
    return v;
  }
}

// Calls f(T{}) with T the CUDA type for a DType code.
template <typename Fn>
void dispatch_cuda_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kFloat32:
      fn(float{});
      break;
    case DType::kFloat64:
      fn(double{});
      break;
    case DType::kFloat16:
      fn(__half{});
      break;
    case DType::kBFloat16:
      fn(__nv_bfloat16{});
      break;
  }
}

}  // namespace galfast
