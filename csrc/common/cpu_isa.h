// Run-time choice of the CPU instruction set for kernels compiled twice (baseline and
// *_avx2.cpp with -mavx2 -mfma).
#pragma once

namespace galfast {

inline bool cpu_has_avx2_fma() {
#if defined(GALFAST_X86_DISPATCH)
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
#else
  return false;
#endif
}

}  // namespace galfast
