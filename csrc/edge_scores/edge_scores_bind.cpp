// Python glue of the fused bilinear edge scores (edge_scores.h): galfast._C.EdgeScoresParams,
// edge_scores_cpu, edge_scores_backward_cpu, edge_scores_max_dim, edge_scores_padded_dim,
// edge_scores_edges_in_lanes and set_edge_scores_simd. CPU only: on a GPU
// galfast.ops.bilinear_edge_scores runs the torch composition.
#include "bind.h"
#include "edge_scores/edge_scores.h"
#include "edge_scores/edge_scores_avx512.h"

namespace galfast {
namespace {

void check_common(const EdgeScoresParams& p) {
  require(p.num_nodes >= 0 && p.num_edges >= 0, "bilinear_edge_scores: negative size");
  require(p.dim >= 1 && p.num_bases >= 1 && p.num_levels >= 1,
          "bilinear_edge_scores: need dim, num_bases and num_levels >= 1");
  require(known_dtype(p.dtype), "bilinear_edge_scores: unknown dtype");
  require(p.bases && p.coefficients, "bilinear_edge_scores: bases or coefficients not set");
  const bool has_edges = p.num_edges > 0;
  require(!has_edges || (p.src && p.dst && p.z), "bilinear_edge_scores: z, src or dst not set");
  require(!p.edges_in_lanes || edge_scores_lanes_supported(p.dtype, p.dim),
          "bilinear_edge_scores: edges_in_lanes needs float32, dim <= 64 and a CPU with "
          "AVX-512F/DQ/VL");
}

void check_forward(const EdgeScoresParams& p) {
  check_common(p);
  require(p.out || p.num_edges == 0, "bilinear_edge_scores: out not set");
}

void check_backward(const EdgeScoresParams& p) {
  check_common(p);
  require(p.grad_out || p.num_edges == 0, "bilinear_edge_scores: grad_out not set");
  require(p.projected || p.num_edges == 0, "bilinear_edge_scores: projected not set");
  require(p.grad_z || p.num_nodes == 0, "bilinear_edge_scores: grad_z not set");
  require(p.grad_bases && p.grad_coefficients,
          "bilinear_edge_scores: grad_bases or grad_coefficients not set");
}

}  // namespace

void bind_edge_scores(py::module_& m) {
  py::class_<EdgeScoresParams> params(m, "EdgeScoresParams");
  params.def(py::init<>())
      .def_readwrite("num_nodes", &EdgeScoresParams::num_nodes)
      .def_readwrite("num_edges", &EdgeScoresParams::num_edges)
      .def_readwrite("dim", &EdgeScoresParams::dim)
      .def_readwrite("num_bases", &EdgeScoresParams::num_bases)
      .def_readwrite("num_levels", &EdgeScoresParams::num_levels)
      .def_readwrite("int32_ids", &EdgeScoresParams::int32_ids)
      .def_readwrite("edges_in_lanes", &EdgeScoresParams::edges_in_lanes)
      .def_readwrite("dtype", &EdgeScoresParams::dtype);
  pointer_field(params, "z", &EdgeScoresParams::z);
  pointer_field(params, "src", &EdgeScoresParams::src);
  pointer_field(params, "dst", &EdgeScoresParams::dst);
  pointer_field(params, "bases", &EdgeScoresParams::bases);
  pointer_field(params, "coefficients", &EdgeScoresParams::coefficients);
  pointer_field(params, "out", &EdgeScoresParams::out);
  pointer_field(params, "projected", &EdgeScoresParams::projected);
  pointer_field(params, "grad_out", &EdgeScoresParams::grad_out);
  pointer_field(params, "grad_z", &EdgeScoresParams::grad_z);
  pointer_field(params, "grad_bases", &EdgeScoresParams::grad_bases);
  pointer_field(params, "grad_coefficients", &EdgeScoresParams::grad_coefficients);

  m.def("edge_scores_max_dim", &edge_scores_max_dim, py::arg("dtype"));
  m.def("edge_scores_padded_dim", &edge_scores_padded_dim, py::arg("dtype"), py::arg("dim"));
  m.def("edge_scores_edges_in_lanes", &edge_scores_edges_in_lanes, py::arg("dtype"),
        py::arg("dim"));
  // Returns the previous setting; tests turn the edges-in-lanes kernel off to compare it with
  // the AVX2 kernel on the same machine.
  m.def(
      "set_edge_scores_simd",
      [](bool allowed) { return edge_scores_simd_allowed().exchange(allowed); },
      py::arg("allowed"));
  def_kernel<EdgeScoresParams>(m, "edge_scores", check_forward, edge_scores_cpu, nullptr);
  def_kernel<EdgeScoresParams>(m, "edge_scores_backward", check_backward, edge_scores_backward_cpu,
                               nullptr);
}

}  // namespace galfast
