// Python glue of the NNConv kernels (nnconv.h): galfast._C.NnconvParams, NnconvEdgeGradParams,
// NnconvGradXParams, NnconvFusedParams and nnconv_forward / nnconv_edge_grad / nnconv_grad_x
// (_cpu, _cuda), nnconv_fused_forward / nnconv_fused_backward (_cpu).
#include "bind.h"
#include "nnconv/nnconv.h"

namespace galfast {
namespace {

template <typename Params>
void check_sizes(const Params& p, const char* kernel) {
  require(
      p.num_edges >= 0 && p.num_rows >= 0 && p.num_cols >= 0 && p.hidden >= 0 && p.features >= 0,
      std::string(kernel) + ": negative size");
  require(known_dtype(p.dtype), std::string(kernel) + ": unknown dtype");
  require(p.rowptr && (p.num_edges == 0 || p.col), std::string(kernel) + ": rowptr/col not set");
}

void check(const NnconvParams& p) {
  check_sizes(p, "nnconv_aggregate");
  const bool rows = p.num_rows > 0;
  require(!rows || p.features == 0 || p.a, "nnconv_aggregate: a not set");
  require(!rows || p.features * p.hidden == 0 || p.s, "nnconv_aggregate: s not set");
  require(p.num_cols * p.features == 0 || p.x, "nnconv_aggregate: x not set");
  require(p.num_edges * p.hidden == 0 || p.h, "nnconv_aggregate: h not set");
}

void check(const NnconvEdgeGradParams& p) {
  check_sizes(p, "nnconv_aggregate backward");
  const bool edges = p.num_edges > 0;
  require(!edges || p.hidden == 0 || (p.h && p.grad_h),
          "nnconv_aggregate backward: h/grad_h not set");
  require(!edges || p.features == 0 || (p.x && p.edge_grad_x),
          "nnconv_aggregate backward: x/edge_grad_x not set");
  require(!edges || p.features * p.hidden == 0 || p.grad_s,
          "nnconv_aggregate backward: grad_s not set");
}

void check(const NnconvGradXParams& p) {
  require(p.num_edges >= 0 && p.num_cols >= 0 && p.features >= 0,
          "nnconv_aggregate backward: negative size");
  require(known_dtype(p.dtype), "nnconv_aggregate backward: unknown dtype");
  require(p.colptr && (p.num_edges == 0 || p.csc_edge_id),
          "nnconv_aggregate backward: colptr/csc_edge_id not set");
  require(p.features == 0 || ((p.num_edges == 0 || p.edge_grad_x) && (p.num_cols == 0 || p.grad_x)),
          "nnconv_aggregate backward: edge_grad_x/grad_x not set");
}

void check(const NnconvFusedParams& p) {
  check_sizes(p, "nnconv_aggregate (fused)");
  require(p.out_features >= 0, "nnconv_aggregate (fused): negative out_features");
  const bool rows = p.num_rows > 0;
  require(p.num_cols * p.features == 0 || p.x, "nnconv_aggregate (fused): x not set");
  require(p.num_edges * p.hidden == 0 || p.h, "nnconv_aggregate (fused): h not set");
  require(p.hidden * p.features * p.out_features == 0 || p.w3,
          "nnconv_aggregate (fused): w3 not set");
  require(!rows || p.out_features == 0 || p.out, "nnconv_aggregate (fused): out not set");
  require(!rows || p.features == 0 || p.a, "nnconv_aggregate (fused): a not set");
}

void check_backward(const NnconvFusedParams& p) {
  check_sizes(p, "nnconv_aggregate backward (fused)");
  require(p.out_features >= 0, "nnconv_aggregate backward (fused): negative out_features");
  const bool rows = p.num_rows > 0, edges = p.num_edges > 0;
  const int64_t weights = p.hidden * p.features * p.out_features;
  require(weights == 0 || (p.w3t && p.grad_w3),
          "nnconv_aggregate backward (fused): w3t/grad_w3 not set");
  require(!rows || p.out_features == 0 || p.grad_out,
          "nnconv_aggregate backward (fused): grad_out not set");
  require(!edges || p.hidden == 0 || (p.h && p.grad_h),
          "nnconv_aggregate backward (fused): h/grad_h not set");
  require(!edges || p.features == 0 || (p.x && p.edge_grad_x),
          "nnconv_aggregate backward (fused): x/edge_grad_x not set");
}

template <typename Params>
void bind_sizes(py::class_<Params>& cls) {
  cls.def(py::init<>())
      .def_readwrite("num_edges", &Params::num_edges)
      .def_readwrite("num_rows", &Params::num_rows)
      .def_readwrite("num_cols", &Params::num_cols)
      .def_readwrite("hidden", &Params::hidden)
      .def_readwrite("features", &Params::features)
      .def_readwrite("dtype", &Params::dtype);
}

}  // namespace

void bind_nnconv(py::module_& m) {
  py::class_<NnconvParams> fwd(m, "NnconvParams");
  bind_sizes(fwd);
  pointer_field(fwd, "rowptr", &NnconvParams::rowptr);
  pointer_field(fwd, "col", &NnconvParams::col);
  pointer_field(fwd, "row_scale", &NnconvParams::row_scale);
  pointer_field(fwd, "x", &NnconvParams::x);
  pointer_field(fwd, "h", &NnconvParams::h);
  pointer_field(fwd, "s", &NnconvParams::s);
  pointer_field(fwd, "a", &NnconvParams::a);

  py::class_<NnconvEdgeGradParams> eg(m, "NnconvEdgeGradParams");
  bind_sizes(eg);
  pointer_field(eg, "rowptr", &NnconvEdgeGradParams::rowptr);
  pointer_field(eg, "col", &NnconvEdgeGradParams::col);
  pointer_field(eg, "row_scale", &NnconvEdgeGradParams::row_scale);
  pointer_field(eg, "x", &NnconvEdgeGradParams::x);
  pointer_field(eg, "h", &NnconvEdgeGradParams::h);
  pointer_field(eg, "grad_s", &NnconvEdgeGradParams::grad_s);
  pointer_field(eg, "grad_a", &NnconvEdgeGradParams::grad_a);
  pointer_field(eg, "grad_h", &NnconvEdgeGradParams::grad_h);
  pointer_field(eg, "edge_grad_x", &NnconvEdgeGradParams::edge_grad_x);

  py::class_<NnconvGradXParams> gx(m, "NnconvGradXParams");
  gx.def(py::init<>())
      .def_readwrite("num_edges", &NnconvGradXParams::num_edges)
      .def_readwrite("num_cols", &NnconvGradXParams::num_cols)
      .def_readwrite("features", &NnconvGradXParams::features)
      .def_readwrite("dtype", &NnconvGradXParams::dtype);
  pointer_field(gx, "colptr", &NnconvGradXParams::colptr);
  pointer_field(gx, "csc_edge_id", &NnconvGradXParams::csc_edge_id);
  pointer_field(gx, "edge_grad_x", &NnconvGradXParams::edge_grad_x);
  pointer_field(gx, "grad_x", &NnconvGradXParams::grad_x);

  py::class_<NnconvFusedParams> fused(m, "NnconvFusedParams");
  bind_sizes(fused);
  fused.def_readwrite("out_features", &NnconvFusedParams::out_features);
  pointer_field(fused, "rowptr", &NnconvFusedParams::rowptr);
  pointer_field(fused, "col", &NnconvFusedParams::col);
  pointer_field(fused, "row_scale", &NnconvFusedParams::row_scale);
  pointer_field(fused, "x", &NnconvFusedParams::x);
  pointer_field(fused, "h", &NnconvFusedParams::h);
  pointer_field(fused, "w3", &NnconvFusedParams::w3);
  pointer_field(fused, "w3t", &NnconvFusedParams::w3t);
  pointer_field(fused, "grad_out", &NnconvFusedParams::grad_out);
  pointer_field(fused, "grad_a", &NnconvFusedParams::grad_a);
  pointer_field(fused, "out", &NnconvFusedParams::out);
  pointer_field(fused, "a", &NnconvFusedParams::a);
  pointer_field(fused, "grad_h", &NnconvFusedParams::grad_h);
  pointer_field(fused, "edge_grad_x", &NnconvFusedParams::edge_grad_x);
  pointer_field(fused, "grad_w3", &NnconvFusedParams::grad_w3);

  // CPU only: on a GPU the blocks of rows run as separate kernels on one stream (no barriers).
  def_kernel<NnconvFusedParams>(m, "nnconv_fused_forward", check, nnconv_fused_forward_cpu,
                                nullptr);
  def_kernel<NnconvFusedParams>(m, "nnconv_fused_backward", check_backward,
                                nnconv_fused_backward_cpu, nullptr);
  def_kernel<NnconvParams>(m, "nnconv_forward", check, nnconv_forward_cpu,
                           GALFAST_CUDA_KERNEL(nnconv_forward_cuda));
  def_kernel<NnconvEdgeGradParams>(m, "nnconv_edge_grad", check, nnconv_edge_grad_cpu,
                                   GALFAST_CUDA_KERNEL(nnconv_edge_grad_cuda));
  def_kernel<NnconvGradXParams>(m, "nnconv_grad_x", check, nnconv_grad_x_cpu,
                                GALFAST_CUDA_KERNEL(nnconv_grad_x_cuda));
}

}  // namespace galfast
