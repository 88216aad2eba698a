// Python glue of the neighbour sampler (sample_neighbors.h): galfast._C.SampleNeighborsParams,
// RelabelParams, SAMPLER_MAX_LAYERS, SAMPLER_MAX_DEGREE, sample_neighbors_count_cpu/_cuda,
// sample_neighbors_cpu/_cuda and relabel_cpu.
#include <string>

#include "bind.h"
#include "sampler/sample_neighbors.h"

namespace galfast {
namespace {

void check_common(const SampleNeighborsParams& p) {
  require(p.num_nodes >= 0 && p.num_edges >= 0 && p.num_dst >= 0,
          "sample_neighbors: negative size");
  require(p.layer >= 0 && p.layer < kMaxLayers,
          "sample_neighbors: layer must lie in [0, " + std::to_string(kMaxLayers) + ")");
  require(
      p.weight == nullptr || p.weight_dtype == DType::kFloat32 || p.weight_dtype == DType::kFloat64,
      "sample_neighbors: weights must be float32 or float64");
  require(p.rowptr && (p.num_dst == 0 || p.dst) && (p.num_edges == 0 || p.col),
          "sample_neighbors: pointers not set");
}

void check_count(const SampleNeighborsParams& p) {
  check_common(p);
  require(p.num_dst == 0 || p.count, "sample_neighbors_count: count not set");
}

void check_sample(const SampleNeighborsParams& p) {
  check_common(p);
  require(p.out_rowptr != nullptr, "sample_neighbors: out_rowptr not set");
  require(p.weight == nullptr || p.fanout < 0 || p.key_scratch,
          "sample_neighbors: weighted sampling needs key_scratch");
}

// On the CPU out_rowptr is host memory: the outputs must be set when any edge is sampled.
void check_sample_cpu(const SampleNeighborsParams& p) {
  require(p.out_rowptr[p.num_dst] == 0 || (p.edge_id && p.src),
          "sample_neighbors: outputs not set");
}

void check_relabel(const RelabelParams& p) {
  require(p.num_nodes >= 0 && p.num_dst >= 0 && p.num_src_edges >= 0, "relabel: negative size");
  require(p.num_local && (p.num_dst + p.num_src_edges == 0 || (p.node_map && p.nodes)) &&
              (p.num_dst == 0 || p.dst) && (p.num_src_edges == 0 || (p.src && p.local)),
          "relabel: pointers not set");
}

}  // namespace

void bind_sample_neighbors(py::module_& m) {
  m.attr("SAMPLER_MAX_LAYERS") = kMaxLayers;
  m.attr("SAMPLER_MAX_DEGREE") = kMaxSampleDegree;

  py::class_<SampleNeighborsParams> sample(m, "SampleNeighborsParams");
  sample.def(py::init<>())
      .def_readwrite("num_nodes", &SampleNeighborsParams::num_nodes)
      .def_readwrite("num_edges", &SampleNeighborsParams::num_edges)
      .def_readwrite("num_dst", &SampleNeighborsParams::num_dst)
      .def_readwrite("fanout", &SampleNeighborsParams::fanout)
      .def_readwrite("seed", &SampleNeighborsParams::seed)
      .def_readwrite("batch", &SampleNeighborsParams::batch)
      .def_readwrite("layer", &SampleNeighborsParams::layer)
      .def_readwrite("weight_dtype", &SampleNeighborsParams::weight_dtype);
  pointer_field(sample, "rowptr", &SampleNeighborsParams::rowptr);
  pointer_field(sample, "col", &SampleNeighborsParams::col);
  pointer_field(sample, "weight", &SampleNeighborsParams::weight);
  pointer_field(sample, "dst", &SampleNeighborsParams::dst);
  pointer_field(sample, "count", &SampleNeighborsParams::count);
  pointer_field(sample, "out_rowptr", &SampleNeighborsParams::out_rowptr);
  pointer_field(sample, "edge_id", &SampleNeighborsParams::edge_id);
  pointer_field(sample, "src", &SampleNeighborsParams::src);
  pointer_field(sample, "key_scratch", &SampleNeighborsParams::key_scratch);

  py::class_<RelabelParams> relabel(m, "RelabelParams");
  relabel.def(py::init<>())
      .def_readwrite("num_nodes", &RelabelParams::num_nodes)
      .def_readwrite("num_dst", &RelabelParams::num_dst)
      .def_readwrite("num_src_edges", &RelabelParams::num_src_edges);
  pointer_field(relabel, "dst", &RelabelParams::dst);
  pointer_field(relabel, "src", &RelabelParams::src);
  pointer_field(relabel, "node_map", &RelabelParams::node_map);
  pointer_field(relabel, "local", &RelabelParams::local);
  pointer_field(relabel, "nodes", &RelabelParams::nodes);
  pointer_field(relabel, "num_local", &RelabelParams::num_local);

  def_kernel<SampleNeighborsParams>(m, "sample_neighbors_count", check_count,
                                    sample_neighbors_count_cpu,
                                    GALFAST_CUDA_KERNEL(sample_neighbors_count_cuda));
  def_kernel<SampleNeighborsParams>(m, "sample_neighbors", check_sample, sample_neighbors_cpu,
                                    GALFAST_CUDA_KERNEL(sample_neighbors_cuda), check_sample_cpu);
  def_kernel<RelabelParams>(m, "relabel", check_relabel, relabel_cpu, nullptr);
}

}  // namespace galfast
