// What every op's pybind11 glue (csrc/<op>/<op>_bind.cpp) shares, and the bind_<op>(m) that
// csrc/bindings.cpp calls for each op. Python owns every buffer and passes raw data pointers
// (ints), sizes, enums and a CUDA stream handle; the glue checks what it can, releases the GIL
// while a kernel runs, and turns std::invalid_argument into ValueError.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/dtype.h"

namespace galfast {

namespace py = pybind11;

void bind_aggregate(py::module_& m);
void bind_gat(py::module_& m);
void bind_sample_nhop(py::module_& m);
void bind_sample_neighbors(py::module_& m);
void bind_nnconv(py::module_& m);
void bind_compgcn(py::module_& m);
void bind_batch_norm(py::module_& m);
void bind_gather_rows(py::module_& m);
void bind_row_dots(py::module_& m);
void bind_edge_scores(py::module_& m);

inline void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument(what);
}

inline bool known_dtype(DType d) {
  return d == DType::kFloat32 || d == DType::kFloat64 || d == DType::kFloat16 ||
         d == DType::kBFloat16;
}

// Exposes a pointer member as a Python int property (0 for null).
template <typename Class, typename Ptr>
void pointer_field(py::class_<Class>& cls, const char* name, Ptr Class::* member) {
  cls.def_property(
      name, [member](const Class& c) { return reinterpret_cast<std::uintptr_t>(c.*member); },
      [member](Class& c, std::uintptr_t v) { c.*member = reinterpret_cast<Ptr>(v); });
}

// The CUDA entry point of a kernel, or nullptr in a build without CUDA (where it is undeclared).
#ifdef GALFAST_WITH_CUDA
#define GALFAST_CUDA_KERNEL(fn) (fn)
#else
#define GALFAST_CUDA_KERNEL(fn) nullptr
#endif

// Binds `<name>_cpu(params)` and, when `cuda` is given, `<name>_cuda(params, stream)`: each
// runs check(params) (and on the CPU check_cpu(params), for checks that read host memory), then
// the kernel without the GIL.
template <typename Params>
void def_kernel(py::module_& m, const std::string& name, void (*check)(const Params&),
                void (*cpu)(const Params&), void (*cuda)(const Params&, void*),
                void (*check_cpu)(const Params&) = nullptr) {
  m.def((name + "_cpu").c_str(),
        [check, check_cpu, cpu](const Params& p) {
          check(p);
          if (check_cpu) check_cpu(p);
          py::gil_scoped_release nogil;
          cpu(p);
        },
        py::arg("params"));
  if (!cuda) return;
  m.def((name + "_cuda").c_str(),
        [check, cuda](const Params& p, std::uintptr_t stream) {
          check(p);
          py::gil_scoped_release nogil;
          cuda(p, reinterpret_cast<void*>(stream));
        },
        py::arg("params"), py::arg("stream"));
}

}  // namespace galfast
