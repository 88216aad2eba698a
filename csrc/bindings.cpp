// The one glue file: exposes the kernels' parameter structs and launchers to Python as
// galfast._C. Python owns every buffer and passes raw data pointers (ints), sizes, dtype codes
// and a CUDA stream handle; this file validates what it can, releases the GIL while a kernel
// runs, and turns C++ exceptions into Python ones (std::invalid_argument -> ValueError).
#include <pybind11/pybind11.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "aggregate/aggregate.h"
#include "common/parallel.h"
#include "gat/gat.h"
#include "walk/sample_nhop.h"

#ifdef GALFAST_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace py = pybind11;
using namespace galfast;

namespace {

// Exposes a pointer member as a Python int property (0 for null).
template <typename Class, typename Ptr>
void pointer_field(py::class_<Class>& cls, const char* name, Ptr Class::* member) {
  cls.def_property(
      name, [member](const Class& c) { return reinterpret_cast<std::uintptr_t>(c.*member); },
      [member](Class& c, std::uintptr_t v) { c.*member = reinterpret_cast<Ptr>(v); });
}

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument(what);
}

void check(const AggregateParams& p) {
  require(p.num_rows >= 0 && p.num_cols >= 0 && p.num_features >= 0, "aggregate: negative size");
  require(p.rowptr, "aggregate: rowptr not set");
  const bool has_x = p.num_cols > 0 && p.num_features > 0;
  const bool has_out = p.num_rows > 0 && p.num_features > 0;
  require(p.x || !has_x, "aggregate: x not set");
  require(p.out || !has_out, "aggregate: out not set");
  require(p.mode != AggMode::kMax || p.arg || !has_out, "aggregate: max needs arg");
  require(p.mode != AggMode::kMaskedSum || p.mask_arg || !has_x,
          "aggregate: masked sum needs mask_arg");
}

void check(const EdgeGradParams& p) {
  require(p.num_rows >= 0 && p.num_cols >= 0 && p.num_features >= 0 && p.num_edges >= 0,
          "edge_grad: negative size");
  require(p.rowptr && (p.num_edges == 0 || (p.col && p.grad_weight)),
          "edge_grad: pointers not set");
}

// ---------------------------------------------------------------- sample_nhop
void check(const SampleNhopParams& p) {
  require(p.num_nodes >= 0 && p.num_walks >= 0, "sample_nhop: negative size");
  require(p.hops >= 1 && p.hops <= kMaxHops,
          "sample_nhop: hops must lie in [1, " + std::to_string(kMaxHops) + "]");
  require(p.mode == WalkMode::kPaper || p.mode == WalkMode::kSimple || p.mode == WalkMode::kExact,
          "sample_nhop: unknown mode");
  require(p.mode != WalkMode::kExact || p.hops <= kMaxExactHops,
          "sample_nhop: exact mode supports hops <= " + std::to_string(kMaxExactHops));
  require(p.index_type == IndexType::kInt32 || p.index_type == IndexType::kInt64,
          "sample_nhop: unknown index type");
  require(p.out_ptr && (p.num_walks == 0 || (p.out_nbr && p.starts && p.end)),
          "sample_nhop: pointers not set");
  require(p.mode != WalkMode::kExact || (p.in_ptr && p.in_nbr),
          "sample_nhop: exact mode needs in_ptr/in_nbr");
}

// On the CPU the starts are host memory, so their range is cheap to check here too.
void check_starts_cpu(const SampleNhopParams& p) {
  for (int64_t i = 0; i < p.num_walks; ++i) {
    if (p.starts[i] < 0 || p.starts[i] >= p.num_nodes) {
      throw std::invalid_argument("sample_nhop: start " + std::to_string(p.starts[i]) +
                                  " of walk " + std::to_string(i) + " is not a node id in [0, " +
                                  std::to_string(p.num_nodes) + ")");
    }
  }
}

// ---------------------------------------------------------------- fused GAT (csrc/gat)
template <typename Params>
void check_gat_sizes(const Params& p) {
  require(p.num_edges >= 0 && p.num_rows >= 0 && p.num_cols >= 0 && p.heads >= 0 && p.features >= 0,
          "gat_aggregate: negative size");
  require(std::isfinite(p.negative_slope), "gat_aggregate: negative_slope must be finite");
  require(p.dropout >= 0.0 && p.dropout <= 1.0, "gat_aggregate: dropout must lie in [0, 1]");
}

void check(const GatParams& p) {
  check_gat_sizes(p);
  const bool rows = p.num_rows * p.heads > 0, cols = p.num_cols * p.heads > 0;
  require(p.rowptr && (p.num_edges == 0 || p.col), "gat_aggregate: rowptr/col not set");
  require(!rows || (p.alpha_dst && p.lse), "gat_aggregate: alpha_dst/lse not set");
  require(!cols || p.alpha_src, "gat_aggregate: alpha_src not set");
  require(p.features == 0 || ((!rows || p.out) && (!cols || p.h)), "gat_aggregate: h/out not set");
}

void check(const GatBackwardParams& p) {
  check_gat_sizes(p);
  const bool rows = p.num_rows * p.heads > 0, cols = p.num_cols * p.heads > 0;
  require(p.rowptr && p.colptr, "gat_aggregate backward: rowptr/colptr not set");
  require(p.num_edges * p.heads == 0 || (p.col && p.csc_row && p.csc_edge_id && p.edge_grad),
          "gat_aggregate backward: edge arrays not set");
  require(!rows || (p.alpha_dst && p.lse && p.delta && p.grad_alpha_dst),
          "gat_aggregate backward: row buffers not set");
  require(!cols || (p.alpha_src && p.grad_alpha_src),
          "gat_aggregate backward: source buffers not set");
  require(p.features == 0 || ((!rows || (p.out && p.grad_out)) && (!cols || (p.h && p.grad_h))),
          "gat_aggregate backward: feature buffers not set");
}

template <typename Params>
void bind_gat_sizes(py::class_<Params>& cls) {
  cls.def(py::init<>())
      .def_readwrite("num_edges", &Params::num_edges)
      .def_readwrite("num_rows", &Params::num_rows)
      .def_readwrite("num_cols", &Params::num_cols)
      .def_readwrite("heads", &Params::heads)
      .def_readwrite("features", &Params::features)
      .def_readwrite("negative_slope", &Params::negative_slope)
      .def_readwrite("dropout", &Params::dropout)
      .def_readwrite("seed", &Params::seed)
      .def_property(
          "dtype", [](const Params& p) { return static_cast<int>(p.dtype); },
          [](Params& p, int code) { p.dtype = dtype_from_code(code); });
}

void bind_gat(py::module_& m) {
  py::class_<GatParams> fwd(m, "GatParams");
  bind_gat_sizes(fwd);
  pointer_field(fwd, "rowptr", &GatParams::rowptr);
  pointer_field(fwd, "col", &GatParams::col);
  pointer_field(fwd, "h", &GatParams::h);
  pointer_field(fwd, "alpha_src", &GatParams::alpha_src);
  pointer_field(fwd, "alpha_dst", &GatParams::alpha_dst);
  pointer_field(fwd, "out", &GatParams::out);
  pointer_field(fwd, "lse", &GatParams::lse);

  py::class_<GatBackwardParams> bwd(m, "GatBackwardParams");
  bind_gat_sizes(bwd);
  pointer_field(bwd, "rowptr", &GatBackwardParams::rowptr);
  pointer_field(bwd, "col", &GatBackwardParams::col);
  pointer_field(bwd, "colptr", &GatBackwardParams::colptr);
  pointer_field(bwd, "csc_row", &GatBackwardParams::csc_row);
  pointer_field(bwd, "csc_edge_id", &GatBackwardParams::csc_edge_id);
  pointer_field(bwd, "h", &GatBackwardParams::h);
  pointer_field(bwd, "alpha_src", &GatBackwardParams::alpha_src);
  pointer_field(bwd, "alpha_dst", &GatBackwardParams::alpha_dst);
  pointer_field(bwd, "out", &GatBackwardParams::out);
  pointer_field(bwd, "lse", &GatBackwardParams::lse);
  pointer_field(bwd, "grad_out", &GatBackwardParams::grad_out);
  pointer_field(bwd, "delta", &GatBackwardParams::delta);
  pointer_field(bwd, "edge_grad", &GatBackwardParams::edge_grad);
  pointer_field(bwd, "grad_h", &GatBackwardParams::grad_h);
  pointer_field(bwd, "grad_alpha_src", &GatBackwardParams::grad_alpha_src);
  pointer_field(bwd, "grad_alpha_dst", &GatBackwardParams::grad_alpha_dst);

  m.def(
      "gat_forward_cpu",
      [](const GatParams& p) {
        check(p);
        py::gil_scoped_release nogil;
        gat_forward_cpu(p);
      },
      py::arg("params"));
  m.def(
      "gat_backward_cpu",
      [](const GatBackwardParams& p) {
        check(p);
        py::gil_scoped_release nogil;
        gat_backward_cpu(p);
      },
      py::arg("params"));
#ifdef GALFAST_WITH_CUDA
  m.def(
      "gat_forward_cuda",
      [](const GatParams& p, std::uintptr_t stream) {
        check(p);
        py::gil_scoped_release nogil;
        gat_forward_cuda(p, reinterpret_cast<void*>(stream));
      },
      py::arg("params"), py::arg("stream"));
  m.def(
      "gat_backward_cuda",
      [](const GatBackwardParams& p, std::uintptr_t stream) {
        check(p);
        py::gil_scoped_release nogil;
        gat_backward_cuda(p, reinterpret_cast<void*>(stream));
      },
      py::arg("params"), py::arg("stream"));
#endif
}

std::string cuda_archs() {
#ifdef GALFAST_CUDA_ARCHS
  return GALFAST_CUDA_ARCHS;
#else
  return "";
#endif
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "galfast native kernels (framework-free; see galfast.ops for the torch API)";

  m.def("build_info", [] {
    py::dict info;
    info["version"] = GALFAST_VERSION;
#ifdef GALFAST_WITH_CUDA
    info["cuda"] = true;
    info["cuda_runtime"] = CUDART_VERSION;
#else
    info["cuda"] = false;
#endif
    info["cuda_archs"] = cuda_archs();
#ifdef _OPENMP
    info["openmp"] = true;
#else
    info["openmp"] = false;
#endif
    info["compiler"] = GALFAST_COMPILER;
    return info;
  });
  m.def(
      "set_num_threads",
      [](int n) {
        if (n < 1) throw std::invalid_argument("set_num_threads: n must be >= 1");
        set_cpu_threads(n);
      },
      py::arg("n"));
  m.def("get_num_threads", &max_threads);
  m.attr("HUB_DEGREE") = kHubDegree;

  py::enum_<AggMode>(m, "AggMode")
      .value("SUM", AggMode::kSum)
      .value("MAX", AggMode::kMax)
      .value("MASKED_SUM", AggMode::kMaskedSum);

  py::class_<AggregateParams> agg(m, "AggregateParams");
  agg.def(py::init<>())
      .def_readwrite("num_hub_rows", &AggregateParams::num_hub_rows)
      .def_readwrite("num_rows", &AggregateParams::num_rows)
      .def_readwrite("num_cols", &AggregateParams::num_cols)
      .def_readwrite("num_features", &AggregateParams::num_features)
      .def_readwrite("mode", &AggregateParams::mode)
      .def_property(
          "dtype", [](const AggregateParams& p) { return static_cast<int>(p.dtype); },
          [](AggregateParams& p, int code) { p.dtype = dtype_from_code(code); });
  pointer_field(agg, "rowptr", &AggregateParams::rowptr);
  pointer_field(agg, "col", &AggregateParams::col);
  pointer_field(agg, "edge_id", &AggregateParams::edge_id);
  pointer_field(agg, "weight", &AggregateParams::weight);
  pointer_field(agg, "row_scale", &AggregateParams::row_scale);
  pointer_field(agg, "col_scale", &AggregateParams::col_scale);
  pointer_field(agg, "x", &AggregateParams::x);
  pointer_field(agg, "out", &AggregateParams::out);
  pointer_field(agg, "arg", &AggregateParams::arg);
  pointer_field(agg, "mask_arg", &AggregateParams::mask_arg);
  pointer_field(agg, "hub_rows", &AggregateParams::hub_rows);

  py::class_<EdgeGradParams> eg(m, "EdgeGradParams");
  eg.def(py::init<>())
      .def_readwrite("num_edges", &EdgeGradParams::num_edges)
      .def_readwrite("num_rows", &EdgeGradParams::num_rows)
      .def_readwrite("num_cols", &EdgeGradParams::num_cols)
      .def_readwrite("num_features", &EdgeGradParams::num_features)
      .def_property(
          "dtype", [](const EdgeGradParams& p) { return static_cast<int>(p.dtype); },
          [](EdgeGradParams& p, int code) { p.dtype = dtype_from_code(code); });
  pointer_field(eg, "rowptr", &EdgeGradParams::rowptr);
  pointer_field(eg, "row", &EdgeGradParams::row);
  pointer_field(eg, "col", &EdgeGradParams::col);
  pointer_field(eg, "row_scale", &EdgeGradParams::row_scale);
  pointer_field(eg, "col_scale", &EdgeGradParams::col_scale);
  pointer_field(eg, "grad_out", &EdgeGradParams::grad_out);
  pointer_field(eg, "x", &EdgeGradParams::x);
  pointer_field(eg, "arg", &EdgeGradParams::arg);
  pointer_field(eg, "grad_weight", &EdgeGradParams::grad_weight);

  m.def(
      "aggregate_cpu",
      [](const AggregateParams& p) {
        check(p);
        py::gil_scoped_release nogil;
        aggregate_cpu(p);
      },
      py::arg("params"));
  m.def(
      "edge_grad_cpu",
      [](const EdgeGradParams& p) {
        check(p);
        py::gil_scoped_release nogil;
        edge_grad_cpu(p);
      },
      py::arg("params"));

#ifdef GALFAST_WITH_CUDA
  m.def(
      "aggregate_cuda",
      [](const AggregateParams& p, std::uintptr_t stream) {
        check(p);
        py::gil_scoped_release nogil;
        aggregate_cuda(p, reinterpret_cast<void*>(stream));
      },
      py::arg("params"), py::arg("stream"));
  m.def(
      "edge_grad_cuda",
      [](const EdgeGradParams& p, std::uintptr_t stream) {
        check(p);
        py::gil_scoped_release nogil;
        edge_grad_cuda(p, reinterpret_cast<void*>(stream));
      },
      py::arg("params"), py::arg("stream"));
#endif

  // ---------------------------------------------------------------- sample_nhop
  m.attr("NHOP_MAX_HOPS") = kMaxHops;
  m.attr("NHOP_MAX_EXACT_HOPS") = kMaxExactHops;
  py::enum_<WalkMode>(m, "WalkMode")
      .value("PAPER", WalkMode::kPaper)
      .value("SIMPLE", WalkMode::kSimple)
      .value("EXACT", WalkMode::kExact);
  py::enum_<IndexType>(m, "IndexType")
      .value("INT32", IndexType::kInt32)
      .value("INT64", IndexType::kInt64);

  py::class_<SampleNhopParams> walk(m, "SampleNhopParams");
  walk.def(py::init<>())
      .def_readwrite("num_nodes", &SampleNhopParams::num_nodes)
      .def_readwrite("num_walks", &SampleNhopParams::num_walks)
      .def_readwrite("walk_offset", &SampleNhopParams::walk_offset)
      .def_readwrite("seed", &SampleNhopParams::seed)
      .def_readwrite("hops", &SampleNhopParams::hops)
      .def_readwrite("max_retries", &SampleNhopParams::max_retries)
      .def_readwrite("mode", &SampleNhopParams::mode)
      .def_readwrite("index_type", &SampleNhopParams::index_type);
  pointer_field(walk, "out_ptr", &SampleNhopParams::out_ptr);
  pointer_field(walk, "out_nbr", &SampleNhopParams::out_nbr);
  pointer_field(walk, "in_ptr", &SampleNhopParams::in_ptr);
  pointer_field(walk, "in_nbr", &SampleNhopParams::in_nbr);
  pointer_field(walk, "starts", &SampleNhopParams::starts);
  pointer_field(walk, "end", &SampleNhopParams::end);
  pointer_field(walk, "paths", &SampleNhopParams::paths);

  m.def(
      "sample_nhop_cpu",
      [](const SampleNhopParams& p) {
        check(p);
        check_starts_cpu(p);
        py::gil_scoped_release nogil;
        sample_nhop_cpu(p);
      },
      py::arg("params"));
#ifdef GALFAST_WITH_CUDA
  m.def(
      "sample_nhop_cuda",
      [](const SampleNhopParams& p, std::uintptr_t stream) {
        check(p);
        py::gil_scoped_release nogil;
        sample_nhop_cuda(p, reinterpret_cast<void*>(stream));
      },
      py::arg("params"), py::arg("stream"));
#endif

  bind_gat(m);
}
