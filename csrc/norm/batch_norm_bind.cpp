// Python glue of the batch normalisation kernels (batch_norm.h): BatchNormParams,
// BatchNormBackwardParams, BatchNormRunningParams and their _cpu entry points (no CUDA kernel:
// galfast.nn.BatchNorm runs torch's own on the GPU).
#include <cmath>

#include "bind.h"
#include "norm/batch_norm.h"

namespace galfast {
namespace {

void check_sizes(int64_t num_rows, int64_t num_channels, DType dtype, const char* what) {
  require(num_rows >= 0 && num_channels >= 0, std::string(what) + ": negative size");
  require(known_dtype(dtype), std::string(what) + ": unknown dtype");
}

void check(const BatchNormParams& p) {
  check_sizes(p.num_rows, p.num_channels, p.dtype, "batch_norm");
  require(p.num_rows > 0 || p.num_channels == 0, "batch_norm: no rows to normalise over");
  require(std::isfinite(p.eps) && p.eps >= 0, "batch_norm: eps must be finite and >= 0");
  const bool has_data = p.num_channels > 0;
  require(!has_data || (p.x && p.y && p.stats), "batch_norm: x/y/stats not set");
}

void check(const BatchNormBackwardParams& p) {
  check_sizes(p.num_rows, p.num_channels, p.dtype, "batch_norm backward");
  require(p.num_rows > 0 || p.num_channels == 0, "batch_norm backward: no rows");
  require(std::isfinite(p.eps) && p.eps >= 0, "batch_norm backward: eps must be finite and >= 0");
  const bool has_data = p.num_channels > 0;
  require(!has_data || (p.x && p.grad_y && p.stats), "batch_norm backward: x/grad_y/stats not set");
}

void check(const BatchNormRunningParams& p) {
  check_sizes(p.num_rows, p.num_channels, p.dtype, "batch_norm running stats");
  require(p.num_rows > 1, "batch_norm running stats: the batch needs more than 1 row");
  require(p.momentum >= 0 && p.momentum <= 1,
          "batch_norm running stats: momentum must be in [0, 1]");
  require(p.stats || p.num_channels == 0, "batch_norm running stats: stats not set");
}

}  // namespace

void bind_batch_norm(py::module_& m) {
  py::class_<BatchNormParams> fwd(m, "BatchNormParams");
  fwd.def(py::init<>())
      .def_readwrite("num_rows", &BatchNormParams::num_rows)
      .def_readwrite("num_channels", &BatchNormParams::num_channels)
      .def_readwrite("eps", &BatchNormParams::eps)
      .def_readwrite("dtype", &BatchNormParams::dtype);
  pointer_field(fwd, "x", &BatchNormParams::x);
  pointer_field(fwd, "weight", &BatchNormParams::weight);
  pointer_field(fwd, "bias", &BatchNormParams::bias);
  pointer_field(fwd, "y", &BatchNormParams::y);
  pointer_field(fwd, "stats", &BatchNormParams::stats);

  py::class_<BatchNormBackwardParams> bwd(m, "BatchNormBackwardParams");
  bwd.def(py::init<>())
      .def_readwrite("num_rows", &BatchNormBackwardParams::num_rows)
      .def_readwrite("num_channels", &BatchNormBackwardParams::num_channels)
      .def_readwrite("eps", &BatchNormBackwardParams::eps)
      .def_readwrite("dtype", &BatchNormBackwardParams::dtype);
  pointer_field(bwd, "x", &BatchNormBackwardParams::x);
  pointer_field(bwd, "grad_y", &BatchNormBackwardParams::grad_y);
  pointer_field(bwd, "stats", &BatchNormBackwardParams::stats);
  pointer_field(bwd, "weight", &BatchNormBackwardParams::weight);
  pointer_field(bwd, "grad_x", &BatchNormBackwardParams::grad_x);
  pointer_field(bwd, "grad_weight", &BatchNormBackwardParams::grad_weight);
  pointer_field(bwd, "grad_bias", &BatchNormBackwardParams::grad_bias);

  py::class_<BatchNormRunningParams> run(m, "BatchNormRunningParams");
  run.def(py::init<>())
      .def_readwrite("num_rows", &BatchNormRunningParams::num_rows)
      .def_readwrite("num_channels", &BatchNormRunningParams::num_channels)
      .def_readwrite("momentum", &BatchNormRunningParams::momentum)
      .def_readwrite("dtype", &BatchNormRunningParams::dtype);
  pointer_field(run, "stats", &BatchNormRunningParams::stats);
  pointer_field(run, "running_mean", &BatchNormRunningParams::running_mean);
  pointer_field(run, "running_var", &BatchNormRunningParams::running_var);

  def_kernel<BatchNormParams>(m, "batch_norm", check, batch_norm_cpu, nullptr);
  def_kernel<BatchNormBackwardParams>(m, "batch_norm_backward", check, batch_norm_backward_cpu,
                                      nullptr);
  def_kernel<BatchNormRunningParams>(m, "batch_norm_update_running", check,
                                     batch_norm_update_running_cpu, nullptr);
}

}  // namespace galfast
