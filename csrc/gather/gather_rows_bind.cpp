// Python glue of the row gather (gather_rows.h): galfast._C.GatherRowsParams, gather_rows_cpu
// and scatter_add_rows_cpu. CPU only: on a GPU galfast.ops.gather_rows runs torch's
// index_select.
#include "bind.h"
#include "gather/gather_rows.h"

namespace galfast {
namespace {

void check(const GatherRowsParams& p) {
  require(p.num_rows >= 0 && p.num_index >= 0 && p.width >= 0, "gather_rows: negative size");
  require(known_dtype(p.dtype), "gather_rows: unknown dtype");
  require(p.index || p.num_index == 0, "gather_rows: index not set");
  const bool moves_data = p.width > 0;
  require(p.table || !moves_data || p.num_rows == 0, "gather_rows: table not set");
  require(p.picked || !moves_data || p.num_index == 0, "gather_rows: picked not set");
}

}  // namespace

void bind_gather_rows(py::module_& m) {
  py::class_<GatherRowsParams> params(m, "GatherRowsParams");
  params.def(py::init<>())
      .def_readwrite("num_rows", &GatherRowsParams::num_rows)
      .def_readwrite("num_index", &GatherRowsParams::num_index)
      .def_readwrite("width", &GatherRowsParams::width)
      .def_readwrite("int32_index", &GatherRowsParams::int32_index)
      .def_readwrite("dtype", &GatherRowsParams::dtype);
  pointer_field(params, "index", &GatherRowsParams::index);
  pointer_field(params, "table", &GatherRowsParams::table);
  pointer_field(params, "picked", &GatherRowsParams::picked);

  def_kernel<GatherRowsParams>(m, "gather_rows", check, gather_rows_cpu, nullptr);
  def_kernel<GatherRowsParams>(m, "scatter_add_rows", check, scatter_add_rows_cpu, nullptr);
}

}  // namespace galfast
