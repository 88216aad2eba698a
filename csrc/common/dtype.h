// Element types the kernels accept.
#pragma once

#include <stdexcept>
#include <string>

namespace galfast {

// Bound as galfast._C.DType (csrc/bindings.cpp); galfast/_dtypes.py maps torch dtypes to it.
enum class DType : int { kFloat32 = 0, kFloat64 = 1, kFloat16 = 2, kBFloat16 = 3 };

inline const char* dtype_name(DType d) {
  switch (d) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
  }
  return "unknown";
}

// The CPU kernels compute in float32 and float64 only (half types are CUDA-only).
inline void require_cpu_dtype(DType dtype, const char* what) {
  if (dtype != DType::kFloat32 && dtype != DType::kFloat64) {
    throw std::invalid_argument(std::string(what) + " on CPU supports float32 and float64, got " +
                                dtype_name(dtype));
  }
}

// Calls fn(float{}) or fn(double{}) for a CPU kernel's element type; other types throw as
// require_cpu_dtype does.
template <typename Fn>
void dispatch_dtype(DType dtype, const char* what, Fn&& fn) {
  switch (dtype) {
    case DType::kFloat32:
      return fn(float{});
    case DType::kFloat64:
      return fn(double{});
    default:
      require_cpu_dtype(dtype, what);
  }
}

}  // namespace galfast
