// Python glue of fused GAT (gat.h): galfast._C.GatParams, GatBackwardParams,
// gat_forward_cpu/_cuda and gat_backward_cpu/_cuda.
#include <cmath>

#include "bind.h"
#include "gat/gat.h"

namespace galfast {
namespace {

template <typename Params>
void check_sizes(const Params& p) {
  require(p.num_edges >= 0 && p.num_rows >= 0 && p.num_cols >= 0 && p.heads >= 0 && p.features >= 0,
          "gat_aggregate: negative size");
  require(std::isfinite(p.negative_slope), "gat_aggregate: negative_slope must be finite");
  require(p.dropout >= 0.0 && p.dropout <= 1.0, "gat_aggregate: dropout must lie in [0, 1]");
  require(known_dtype(p.dtype), "gat_aggregate: unknown dtype");
}

void check(const GatParams& p) {
  check_sizes(p);
  const bool rows = p.num_rows * p.heads > 0, cols = p.num_cols * p.heads > 0;
  require(p.rowptr && (p.num_edges == 0 || p.col), "gat_aggregate: rowptr/col not set");
  require(!rows || (p.alpha_dst && p.lse), "gat_aggregate: alpha_dst/lse not set");
  require(!cols || p.alpha_src, "gat_aggregate: alpha_src not set");
  require(p.features == 0 || ((!rows || p.out) && (!cols || p.h)), "gat_aggregate: h/out not set");
}

void check(const GatBackwardParams& p) {
  check_sizes(p);
  const bool rows = p.num_rows * p.heads > 0, cols = p.num_cols * p.heads > 0;
  require(p.rowptr && p.colptr, "gat_aggregate backward: rowptr/colptr not set");
  require(p.num_edges * p.heads == 0 ||
              (p.col && p.csc_row && p.csc_edge_id && p.csr_to_csc && p.edge_grad),
          "gat_aggregate backward: edge arrays not set");
  require(!rows || (p.alpha_dst && p.lse && p.delta && p.grad_alpha_dst),
          "gat_aggregate backward: row buffers not set");
  require(!cols || (p.alpha_src && p.grad_alpha_src),
          "gat_aggregate backward: source buffers not set");
  require(p.features == 0 || ((!rows || (p.out && p.grad_out)) && (!cols || (p.h && p.grad_h))),
          "gat_aggregate backward: feature buffers not set");
}

// The size and attention fields both parameter structs have.
template <typename Params>
void bind_sizes(py::class_<Params>& cls) {
  cls.def(py::init<>())
      .def_readwrite("num_edges", &Params::num_edges)
      .def_readwrite("num_rows", &Params::num_rows)
      .def_readwrite("num_cols", &Params::num_cols)
      .def_readwrite("heads", &Params::heads)
      .def_readwrite("features", &Params::features)
      .def_readwrite("negative_slope", &Params::negative_slope)
      .def_readwrite("dropout", &Params::dropout)
      .def_readwrite("seed", &Params::seed)
      .def_readwrite("dtype", &Params::dtype);
}

}  // namespace

void bind_gat(py::module_& m) {
  py::class_<GatParams> fwd(m, "GatParams");
  bind_sizes(fwd);
  pointer_field(fwd, "rowptr", &GatParams::rowptr);
  pointer_field(fwd, "col", &GatParams::col);
  pointer_field(fwd, "h", &GatParams::h);
  pointer_field(fwd, "alpha_src", &GatParams::alpha_src);
  pointer_field(fwd, "alpha_dst", &GatParams::alpha_dst);
  pointer_field(fwd, "alpha_edge", &GatParams::alpha_edge);
  pointer_field(fwd, "out", &GatParams::out);
  pointer_field(fwd, "lse", &GatParams::lse);

  py::class_<GatBackwardParams> bwd(m, "GatBackwardParams");
  bind_sizes(bwd);
  pointer_field(bwd, "rowptr", &GatBackwardParams::rowptr);
  pointer_field(bwd, "col", &GatBackwardParams::col);
  pointer_field(bwd, "colptr", &GatBackwardParams::colptr);
  pointer_field(bwd, "csc_row", &GatBackwardParams::csc_row);
  pointer_field(bwd, "csc_edge_id", &GatBackwardParams::csc_edge_id);
  pointer_field(bwd, "csr_to_csc", &GatBackwardParams::csr_to_csc);
  pointer_field(bwd, "h", &GatBackwardParams::h);
  pointer_field(bwd, "alpha_src", &GatBackwardParams::alpha_src);
  pointer_field(bwd, "alpha_dst", &GatBackwardParams::alpha_dst);
  pointer_field(bwd, "alpha_edge", &GatBackwardParams::alpha_edge);
  pointer_field(bwd, "out", &GatBackwardParams::out);
  pointer_field(bwd, "lse", &GatBackwardParams::lse);
  pointer_field(bwd, "grad_out", &GatBackwardParams::grad_out);
  pointer_field(bwd, "delta", &GatBackwardParams::delta);
  pointer_field(bwd, "edge_grad", &GatBackwardParams::edge_grad);
  pointer_field(bwd, "grad_alpha_edge", &GatBackwardParams::grad_alpha_edge);
  pointer_field(bwd, "grad_h", &GatBackwardParams::grad_h);
  pointer_field(bwd, "grad_alpha_src", &GatBackwardParams::grad_alpha_src);
  pointer_field(bwd, "grad_alpha_dst", &GatBackwardParams::grad_alpha_dst);

  def_kernel<GatParams>(m, "gat_forward", check, gat_forward_cpu,
                        GALFAST_CUDA_KERNEL(gat_forward_cuda));
  def_kernel<GatBackwardParams>(m, "gat_backward", check, gat_backward_cpu,
                                GALFAST_CUDA_KERNEL(gat_backward_cuda));
}

}  // namespace galfast
