// Python glue of the aggregation kernels (aggregate.h): galfast._C.AggMode, AggregateParams,
// EdgeGradParams, aggregate_cpu/_cuda and edge_grad_cpu/_cuda.
#include "aggregate/aggregate.h"
#include "aggregate/aggregate_sum_avx512.h"
#include "bind.h"

namespace galfast {
namespace {

void check(const AggregateParams& p) {
  require(p.num_rows >= 0 && p.num_cols >= 0 && p.num_features >= 0 && p.num_edges >= 0 &&
              p.num_hub_rows >= 0,
          "aggregate: negative size");
  require(p.mode == AggMode::kSum || p.mode == AggMode::kMax || p.mode == AggMode::kMaskedSum,
          "aggregate: unknown mode");
  require(known_dtype(p.dtype), "aggregate: unknown dtype");
  require(p.rowptr, "aggregate: rowptr not set");
  require(p.col || p.num_edges == 0, "aggregate: col not set");
  require(p.hub_rows || p.num_hub_rows == 0, "aggregate: hub_rows not set");
  const bool has_x = p.num_cols > 0 && p.num_features > 0;
  const bool has_out = p.num_rows > 0 && p.num_features > 0;
  require(p.x || !has_x, "aggregate: x not set");
  require(p.out || !has_out, "aggregate: out not set");
  require(p.mode != AggMode::kMax || p.arg || !has_out, "aggregate: max needs arg");
  require(p.mode != AggMode::kMaskedSum || p.mask_arg || !has_x,
          "aggregate: masked sum needs mask_arg");
  if (p.segments) {
    require(p.mode == AggMode::kSum, "aggregate: a segment plan is for the sum only");
    require(p.col32 || p.num_edges == 0, "aggregate: a segment plan needs col32");
    require(p.num_segments >= p.num_rows, "aggregate: fewer segments than rows");
    require(p.partial || p.num_segments == p.num_rows || p.num_features == 0,
            "aggregate: split rows need partial");
  }
}

void check(const EdgeGradParams& p) {
  require(p.num_rows >= 0 && p.num_cols >= 0 && p.num_features >= 0 && p.num_edges >= 0,
          "edge_grad: negative size");
  require(known_dtype(p.dtype), "edge_grad: unknown dtype");
  require(p.rowptr && (p.num_edges == 0 || (p.row && p.col && p.grad_weight)),
          "edge_grad: pointers not set");
  const bool has_features = p.num_features > 0;
  require(!has_features || ((p.num_rows == 0 || p.grad_out) && (p.num_cols == 0 || p.x)),
          "edge_grad: grad_out/x not set");
}

}  // namespace

void bind_aggregate(py::module_& m) {
  m.attr("HUB_DEGREE") = kHubDegree;
  py::enum_<AggMode>(m, "AggMode")
      .value("SUM", AggMode::kSum)
      .value("MAX", AggMode::kMax)
      .value("MASKED_SUM", AggMode::kMaskedSum);

  py::class_<AggregateParams> agg(m, "AggregateParams");
  // Every field in one call, in the struct's order: a small graph's call costs a few
  // microseconds less than one attribute set per field (about 0.3 us each).
  agg.def(py::init<>())
      .def(py::init([](std::uintptr_t rowptr, std::uintptr_t col, std::uintptr_t col32,
                       std::uintptr_t edge_id, std::uintptr_t weight, std::uintptr_t row_scale,
                       std::uintptr_t col_scale, std::uintptr_t x, std::uintptr_t out,
                       std::uintptr_t arg, std::uintptr_t mask_arg, std::uintptr_t hub_rows,
                       int64_t num_hub_rows, int64_t num_edges, int64_t num_rows, int64_t num_cols,
                       int64_t num_features, AggMode mode, DType dtype) {
        AggregateParams p;
        p.rowptr = reinterpret_cast<const int64_t*>(rowptr);
        p.col = reinterpret_cast<const int64_t*>(col);
        p.col32 = reinterpret_cast<const int32_t*>(col32);
        p.edge_id = reinterpret_cast<const int64_t*>(edge_id);
        p.weight = reinterpret_cast<const void*>(weight);
        p.row_scale = reinterpret_cast<const void*>(row_scale);
        p.col_scale = reinterpret_cast<const void*>(col_scale);
        p.x = reinterpret_cast<const void*>(x);
        p.out = reinterpret_cast<void*>(out);
        p.arg = reinterpret_cast<int64_t*>(arg);
        p.mask_arg = reinterpret_cast<const int64_t*>(mask_arg);
        p.hub_rows = reinterpret_cast<const int64_t*>(hub_rows);
        p.num_hub_rows = num_hub_rows;
        p.num_edges = num_edges;
        p.num_rows = num_rows;
        p.num_cols = num_cols;
        p.num_features = num_features;
        p.mode = mode;
        p.dtype = dtype;
        return p;
      }))
      .def_readwrite("num_hub_rows", &AggregateParams::num_hub_rows)
      .def_readwrite("num_segments", &AggregateParams::num_segments)
      .def_readwrite("num_edges", &AggregateParams::num_edges)
      .def_readwrite("num_rows", &AggregateParams::num_rows)
      .def_readwrite("num_cols", &AggregateParams::num_cols)
      .def_readwrite("num_features", &AggregateParams::num_features)
      .def_readwrite("mode", &AggregateParams::mode)
      .def_readwrite("dtype", &AggregateParams::dtype);
  pointer_field(agg, "rowptr", &AggregateParams::rowptr);
  pointer_field(agg, "col", &AggregateParams::col);
  pointer_field(agg, "col32", &AggregateParams::col32);
  pointer_field(agg, "edge_id", &AggregateParams::edge_id);
  pointer_field(agg, "weight", &AggregateParams::weight);
  pointer_field(agg, "row_scale", &AggregateParams::row_scale);
  pointer_field(agg, "col_scale", &AggregateParams::col_scale);
  pointer_field(agg, "x", &AggregateParams::x);
  pointer_field(agg, "out", &AggregateParams::out);
  pointer_field(agg, "arg", &AggregateParams::arg);
  pointer_field(agg, "mask_arg", &AggregateParams::mask_arg);
  pointer_field(agg, "hub_rows", &AggregateParams::hub_rows);
  pointer_field(agg, "segments", &AggregateParams::segments);
  pointer_field(agg, "partial", &AggregateParams::partial);

  py::class_<EdgeGradParams> eg(m, "EdgeGradParams");
  eg.def(py::init<>())
      .def_readwrite("num_edges", &EdgeGradParams::num_edges)
      .def_readwrite("num_rows", &EdgeGradParams::num_rows)
      .def_readwrite("num_cols", &EdgeGradParams::num_cols)
      .def_readwrite("num_features", &EdgeGradParams::num_features)
      .def_readwrite("dtype", &EdgeGradParams::dtype);
  pointer_field(eg, "rowptr", &EdgeGradParams::rowptr);
  pointer_field(eg, "row", &EdgeGradParams::row);
  pointer_field(eg, "col", &EdgeGradParams::col);
  pointer_field(eg, "row_scale", &EdgeGradParams::row_scale);
  pointer_field(eg, "col_scale", &EdgeGradParams::col_scale);
  pointer_field(eg, "grad_out", &EdgeGradParams::grad_out);
  pointer_field(eg, "x", &EdgeGradParams::x);
  pointer_field(eg, "arg", &EdgeGradParams::arg);
  pointer_field(eg, "grad_weight", &EdgeGradParams::grad_weight);

  def_kernel<AggregateParams>(m, "aggregate", check, aggregate_cpu,
                              GALFAST_CUDA_KERNEL(aggregate_cuda));
  def_kernel<EdgeGradParams>(m, "edge_grad", check, edge_grad_cpu,
                             GALFAST_CUDA_KERNEL(edge_grad_cuda));
  // Tests run the AVX2 sum on machines where the AVX-512 one would be chosen.
  m.def(
      "set_aggregate_simd", [](bool allowed) { return aggregate_simd_allowed().exchange(allowed); },
      py::arg("allowed"));
}

}  // namespace galfast
