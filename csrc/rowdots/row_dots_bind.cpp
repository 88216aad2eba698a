// Python glue of the row-dot gradients (row_dots.h): galfast._C.RowDotsBackwardParams and
// row_dots_backward_cpu. CPU only: elsewhere bilinear_forms computes them with torch.
#include "bind.h"
#include "rowdots/row_dots.h"

namespace galfast {
namespace {

void check(const RowDotsBackwardParams& p) {
  require(p.rows >= 0 && p.width >= 0, "row_dots_backward: negative size");
  require(p.num_vectors >= 1, "row_dots_backward: need at least one vector per row");
  require(known_dtype(p.dtype), "row_dots_backward: unknown dtype");
  const bool has_data = p.rows > 0 && p.width > 0;
  require(!has_data || (p.vectors && p.z && p.grad_vectors && p.grad_z),
          "row_dots_backward: vectors, z, grad_vectors or grad_z not set");
  require(p.rows == 0 || p.grad, "row_dots_backward: grad not set");
}

}  // namespace

void bind_row_dots(py::module_& m) {
  py::class_<RowDotsBackwardParams> params(m, "RowDotsBackwardParams");
  params.def(py::init<>())
      .def_readwrite("rows", &RowDotsBackwardParams::rows)
      .def_readwrite("num_vectors", &RowDotsBackwardParams::num_vectors)
      .def_readwrite("width", &RowDotsBackwardParams::width)
      .def_readwrite("dtype", &RowDotsBackwardParams::dtype);
  pointer_field(params, "vectors", &RowDotsBackwardParams::vectors);
  pointer_field(params, "z", &RowDotsBackwardParams::z);
  pointer_field(params, "grad", &RowDotsBackwardParams::grad);
  pointer_field(params, "grad_vectors", &RowDotsBackwardParams::grad_vectors);
  pointer_field(params, "grad_z", &RowDotsBackwardParams::grad_z);

  def_kernel<RowDotsBackwardParams>(m, "row_dots_backward", check, row_dots_backward_cpu, nullptr);
}

}  // namespace galfast
