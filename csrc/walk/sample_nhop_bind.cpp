// Python glue of the n-hop walks (sample_nhop.h): galfast._C.WalkMode, IndexType,
// SampleNhopParams, NHOP_MAX_HOPS, NHOP_MAX_EXACT_HOPS, sample_nhop_cpu/_cuda and
// set_sample_nhop_isa.
#include <cstdint>
#include <string>

#include "bind.h"
#include "walk/sample_nhop.h"
#include "walk/sample_nhop_simd.h"

namespace galfast {
namespace {

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
  require(!p.out_nbr16 || (p.index_type == IndexType::kInt32 && p.num_nodes <= (int64_t(1) << 16)),
          "sample_nhop: 16-bit neighbour ids need an int32 adjacency of at most 2^16 nodes");
  require(p.first_attempt == 0 || (p.mode == WalkMode::kExact && p.first_attempt <= p.max_retries),
          "sample_nhop: first_attempt must be 0, or at most max_retries in exact mode");
}

}  // namespace

void bind_sample_nhop(py::module_& m) {
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
  // Every field in one call, in the struct's order: a small batch's call costs a few
  // microseconds less than one attribute set per field (about 0.3 us each).
  walk.def(py::init<>())
      .def(py::init([](std::uintptr_t out_ptr, std::uintptr_t out_nbr, std::uintptr_t in_ptr,
                       std::uintptr_t in_nbr, std::uintptr_t starts, std::uintptr_t end,
                       std::uintptr_t paths, int64_t num_nodes, int64_t num_walks,
                       uint64_t walk_offset, uint64_t seed, int hops, uint32_t max_retries,
                       uint32_t first_attempt, WalkMode mode, IndexType index_type,
                       std::uintptr_t out_nbr16) {
        SampleNhopParams p;
        p.out_ptr = reinterpret_cast<const void*>(out_ptr);
        p.out_nbr = reinterpret_cast<const void*>(out_nbr);
        p.in_ptr = reinterpret_cast<const void*>(in_ptr);
        p.in_nbr = reinterpret_cast<const void*>(in_nbr);
        p.starts = reinterpret_cast<const int64_t*>(starts);
        p.end = reinterpret_cast<int64_t*>(end);
        p.paths = reinterpret_cast<int64_t*>(paths);
        p.num_nodes = num_nodes;
        p.num_walks = num_walks;
        p.walk_offset = walk_offset;
        p.seed = seed;
        p.hops = hops;
        p.max_retries = max_retries;
        p.first_attempt = first_attempt;
        p.mode = mode;
        p.index_type = index_type;
        p.out_nbr16 = reinterpret_cast<const uint16_t*>(out_nbr16);
        return p;
      }))
      .def_readwrite("num_nodes", &SampleNhopParams::num_nodes)
      .def_readwrite("num_walks", &SampleNhopParams::num_walks)
      .def_readwrite("walk_offset", &SampleNhopParams::walk_offset)
      .def_readwrite("seed", &SampleNhopParams::seed)
      .def_readwrite("hops", &SampleNhopParams::hops)
      .def_readwrite("max_retries", &SampleNhopParams::max_retries)
      .def_readwrite("first_attempt", &SampleNhopParams::first_attempt)
      .def_readwrite("mode", &SampleNhopParams::mode)
      .def_readwrite("index_type", &SampleNhopParams::index_type);
  pointer_field(walk, "out_ptr", &SampleNhopParams::out_ptr);
  pointer_field(walk, "out_nbr", &SampleNhopParams::out_nbr);
  pointer_field(walk, "out_nbr16", &SampleNhopParams::out_nbr16);
  pointer_field(walk, "in_ptr", &SampleNhopParams::in_ptr);
  pointer_field(walk, "in_nbr", &SampleNhopParams::in_nbr);
  pointer_field(walk, "starts", &SampleNhopParams::starts);
  pointer_field(walk, "end", &SampleNhopParams::end);
  pointer_field(walk, "paths", &SampleNhopParams::paths);

  // The CPU kernel checks every start itself, block by block, and names the first bad one.
  def_kernel<SampleNhopParams>(m, "sample_nhop", check, sample_nhop_cpu,
                               GALFAST_CUDA_KERNEL(sample_nhop_cuda));
  // Tests run the AVX2 and baseline CPU walks on machines where wider ones would be chosen:
  // "avx512", "avx2" or "baseline", the widest walks allowed; returns the previous one.
  m.def(
      "set_sample_nhop_isa",
      [](const std::string& widest) {
        static const char* const kNames[] = {"baseline", "avx2", "avx512"};
        int level = 0;
        while (level < 3 && widest != kNames[level]) ++level;
        require(level < 3,
                "set_sample_nhop_isa: '" + widest + "' is not one of 'avx512', 'avx2', 'baseline'");
        return std::string(kNames[static_cast<int>(nhop_widest_isa().exchange(NhopIsa(level)))]);
      },
      py::arg("widest"));
}

}  // namespace galfast
