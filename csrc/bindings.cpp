// The extension module galfast._C: build information, the CPU thread count, the element-type
// enum, and one bind_<op>(m) per op (csrc/<op>/<op>_bind.cpp, helpers in bind.h).
#include <pybind11/pybind11.h>

#include <stdexcept>
#include <string>

#include "bind.h"
#include "common/dtype.h"
#include "common/parallel.h"

#ifdef GALFAST_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace py = pybind11;
using namespace galfast;

namespace {

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

  py::enum_<DType>(m, "DType")
      .value("FLOAT32", DType::kFloat32)
      .value("FLOAT64", DType::kFloat64)
      .value("FLOAT16", DType::kFloat16)
      .value("BFLOAT16", DType::kBFloat16);

  bind_aggregate(m);
  bind_sample_nhop(m);
  bind_gat(m);
  bind_sample_neighbors(m);
  bind_nnconv(m);
  bind_compgcn(m);
  bind_batch_norm(m);
  bind_gather_rows(m);
  bind_row_dots(m);
  bind_edge_scores(m);
}
