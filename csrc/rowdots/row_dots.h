// Gradients of row-wise dot products of S vectors against one (the rating decoder's bilinear
// forms, galfast/models/bilinear_forms.py, whose forward is torch's bmm):
//
//   forward:  out[b, s] = vectors[b, s, :] . z[b, :]
//   backward: grad_vectors[b, s, e] = grad[b, s] * z[b, e]
//             grad_z[b, e]          = sum over s of grad[b, s] * vectors[b, s, e]
//
// grad_z takes the first product rounded, then adds each further one by a fused multiply-add
// (fma(vectors[b, s, e], grad[b, s], sum)) in increasing s: what torch's CPU addcmul computes
// in galfast's former torch form (vectors[:, 0] * grad[:, :1], then addcmul per further s),
// so both gradients are bitwise the same as before. One thread writes a row b of both
// outputs, so the result does not depend on the thread count.
#pragma once

#include <cstdint>

#include "common/dtype.h"

namespace galfast {

struct RowDotsBackwardParams {
  const void* vectors = nullptr;  // [rows, num_vectors, width]
  const void* z = nullptr;        // [rows, width]
  const void* grad = nullptr;     // [rows, num_vectors]
  void* grad_vectors = nullptr;   // [rows, num_vectors, width]
  void* grad_z = nullptr;         // [rows, width]
  int64_t rows = 0;
  int64_t num_vectors = 0;  // S >= 1
  int64_t width = 0;        // E
  DType dtype = DType::kFloat32;
};

void row_dots_backward_cpu(const RowDotsBackwardParams& p);

}  // namespace galfast
