// Python glue of the CompGCN kernels (compgcn.h): galfast._C.Composition, CompgcnParams,
// RelGradParams, compgcn_aggregate_cpu/_cuda and compgcn_rel_grad_cpu/_cuda.
#include "bind.h"
#include "compgcn/compgcn.h"

namespace galfast {
namespace {

bool known_op(Composition op) {
  return op == Composition::kSub || op == Composition::kMult || op == Composition::kCorr ||
         op == Composition::kSource;
}

void check(const CompgcnParams& p) {
  require(p.num_rows >= 0 && p.num_cols >= 0 && p.num_rels >= 0 && p.num_features >= 0 &&
              p.num_edges >= 0,
          "compgcn_aggregate: negative size");
  require(known_op(p.op), "compgcn_aggregate: unknown composition");
  require(known_dtype(p.dtype), "compgcn_aggregate: unknown dtype");
  require(p.op != Composition::kCorr || p.num_features % 2 == 0,
          "compgcn_aggregate: corr needs (re, im) pairs (an even feature count)");
  require(p.rowptr, "compgcn_aggregate: rowptr not set");
  const bool reads_type = p.op != Composition::kSource && p.num_edges > 0;
  require(p.col || p.num_edges == 0, "compgcn_aggregate: col not set");
  require(p.edge_type || !reads_type, "compgcn_aggregate: edge_type not set");
  const bool has_features = p.num_features > 0;
  require(p.x || !has_features || p.num_cols == 0, "compgcn_aggregate: x not set");
  require(p.rel || !has_features || !reads_type, "compgcn_aggregate: rel not set");
  require(p.out || !has_features || p.num_rows == 0, "compgcn_aggregate: out not set");
}

void check(const RelGradParams& p) {
  require(p.num_rows >= 0 && p.num_cols >= 0 && p.num_rels >= 0 && p.num_features >= 0 &&
              p.num_edges >= 0 && p.num_chunks >= 0,
          "compgcn_rel_grad: negative size");
  require(known_op(p.op) && p.op != Composition::kSource,
          "compgcn_rel_grad: composition must be sub, mult or corr");
  require(known_dtype(p.dtype), "compgcn_rel_grad: unknown dtype");
  require(p.op != Composition::kCorr || p.num_features % 2 == 0,
          "compgcn_rel_grad: corr needs (re, im) pairs (an even feature count)");
  require(p.chunkptr && p.rel_chunkptr, "compgcn_rel_grad: chunk offsets not set");
  require(p.num_edges == 0 || (p.row && p.col), "compgcn_rel_grad: edge arrays not set");
  const bool has_features = p.num_features > 0;
  require(!has_features || p.num_edges == 0 ||
              (p.grad_out && (p.x || p.op == Composition::kSub) && p.partial),
          "compgcn_rel_grad: grad_out/x/partial not set");
  require(!has_features || p.num_rels == 0 || p.grad_rel, "compgcn_rel_grad: grad_rel not set");
}

}  // namespace

void bind_compgcn(py::module_& m) {
  py::enum_<Composition>(m, "Composition")
      .value("SUB", Composition::kSub)
      .value("MULT", Composition::kMult)
      .value("CORR", Composition::kCorr)
      .value("SOURCE", Composition::kSource);

  py::class_<CompgcnParams> agg(m, "CompgcnParams");
  agg.def(py::init<>())
      .def_readwrite("num_edges", &CompgcnParams::num_edges)
      .def_readwrite("num_rows", &CompgcnParams::num_rows)
      .def_readwrite("num_cols", &CompgcnParams::num_cols)
      .def_readwrite("num_rels", &CompgcnParams::num_rels)
      .def_readwrite("num_features", &CompgcnParams::num_features)
      .def_readwrite("op", &CompgcnParams::op)
      .def_readwrite("dtype", &CompgcnParams::dtype);
  pointer_field(agg, "rowptr", &CompgcnParams::rowptr);
  pointer_field(agg, "col", &CompgcnParams::col);
  pointer_field(agg, "edge_type", &CompgcnParams::edge_type);
  pointer_field(agg, "weight", &CompgcnParams::weight);
  pointer_field(agg, "row_scale", &CompgcnParams::row_scale);
  pointer_field(agg, "col_scale", &CompgcnParams::col_scale);
  pointer_field(agg, "x", &CompgcnParams::x);
  pointer_field(agg, "rel", &CompgcnParams::rel);
  pointer_field(agg, "out", &CompgcnParams::out);

  py::class_<RelGradParams> rg(m, "RelGradParams");
  rg.def(py::init<>())
      .def_readwrite("num_edges", &RelGradParams::num_edges)
      .def_readwrite("num_chunks", &RelGradParams::num_chunks)
      .def_readwrite("num_rows", &RelGradParams::num_rows)
      .def_readwrite("num_cols", &RelGradParams::num_cols)
      .def_readwrite("num_rels", &RelGradParams::num_rels)
      .def_readwrite("num_features", &RelGradParams::num_features)
      .def_readwrite("op", &RelGradParams::op)
      .def_readwrite("dtype", &RelGradParams::dtype);
  pointer_field(rg, "chunkptr", &RelGradParams::chunkptr);
  pointer_field(rg, "rel_chunkptr", &RelGradParams::rel_chunkptr);
  pointer_field(rg, "row", &RelGradParams::row);
  pointer_field(rg, "col", &RelGradParams::col);
  pointer_field(rg, "weight", &RelGradParams::weight);
  pointer_field(rg, "row_scale", &RelGradParams::row_scale);
  pointer_field(rg, "col_scale", &RelGradParams::col_scale);
  pointer_field(rg, "grad_out", &RelGradParams::grad_out);
  pointer_field(rg, "x", &RelGradParams::x);
  pointer_field(rg, "partial", &RelGradParams::partial);
  pointer_field(rg, "grad_rel", &RelGradParams::grad_rel);

  def_kernel<CompgcnParams>(m, "compgcn_aggregate", check, compgcn_aggregate_cpu,
                            GALFAST_CUDA_KERNEL(compgcn_aggregate_cuda));
  def_kernel<RelGradParams>(m, "compgcn_rel_grad", check, compgcn_rel_grad_cpu,
                            GALFAST_CUDA_KERNEL(compgcn_rel_grad_cuda));
}

}  // namespace galfast
