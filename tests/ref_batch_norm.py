"""Plain-PyTorch reference of galfast.ops.batch_norm: training-mode batch normalisation over
the rows of [N, C], in float64, written from the definition (two passes, biased variance)."""

import torch


def batch_norm_ref(x, weight=None, bias=None, eps=1e-5):
    """(y, mean, biased var) of x [N, C], computed in float64; y is differentiable."""
    x64 = x.double()
    mean = x64.sum(0) / x64.size(0)
    var = ((x64 - mean) ** 2).sum(0) / x64.size(0)
    y = (x64 - mean) / torch.sqrt(var + eps)
    if weight is not None:
        y = y * weight.double()
    if bias is not None:
        y = y + bias.double()
    return y, mean.detach(), var.detach()


def running_stats_ref(running_mean, running_var, batches, momentum):
    """The running buffers after BatchNorm1d's training forwards over `batches`, in float64:
    num_batches_tracked counts them; momentum None is the cumulative average."""
    mean, var = running_mean.double().clone(), running_var.double().clone()
    for step, x in enumerate(batches, start=1):
        m = 1.0 / step if momentum is None else momentum
        x64 = x.double()
        mean = (1 - m) * mean + m * x64.mean(0)
        var = (1 - m) * var + m * x64.var(0, unbiased=True)
    return mean, var
