// Row gather and its adjoint, the row scatter-add: the contract of the CPU kernels.
//
//   gather_rows:      picked[k, :] = table[index[k], :]                    k in [0, num_index)
//   scatter_add_rows: table[r, :]  = sum over k with index[k] == r of picked[k, :]
//
// The scatter-add is gather_rows' backward (index_select's, on a table of num_rows rows). Each
// row's terms are added one at a time in increasing k, starting from +0.0: the order of
// torch's CPU index_add_, so the gradient is bitwise the one of index_select. Rows no index
// names come out 0. Every table row is summed by one thread, so the result does not depend on
// the thread count.
//
// Indices must lie in [0, num_rows): gather_rows throws std::out_of_range (IndexError in
// Python) naming the first bad one it meets; negative indices do not wrap (as in
// index_select). scatter_add_rows is only run on indices its forward checked, and skips any
// index outside [0, num_rows) without reading or writing through it.
#pragma once

#include <cstdint>

#include "common/dtype.h"

namespace galfast {

struct GatherRowsParams {
  const void* index = nullptr;  // [num_index], int64 or (int32_index) int32
  void* table = nullptr;        // [num_rows, width]: read by gather, written by scatter_add
  void* picked = nullptr;       // [num_index, width]: written by gather, read by scatter_add
  int64_t num_rows = 0;
  int64_t num_index = 0;
  int64_t width = 0;  // elements per row
  bool int32_index = false;
  DType dtype = DType::kFloat32;
};

void gather_rows_cpu(const GatherRowsParams& p);
void scatter_add_rows_cpu(const GatherRowsParams& p);

}  // namespace galfast
