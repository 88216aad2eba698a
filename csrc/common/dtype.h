// Element types the kernels accept, as small integer codes that Python passes in.
#pragma once

#include <stdexcept>
#include <string>

namespace galfast {

// Must match galfast/_dtypes.py.
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

inline DType dtype_from_code(int code) {
  if (code < 0 || code > 3)
    throw std::invalid_argument("unknown dtype code " + std::to_string(code));
  return static_cast<DType>(code);
}

}  // namespace galfast
