"""Runs a PyG layer and galfast's with the same weights and inputs, and compares outputs and
the gradients of every input tensor and parameter (shared by tests/test_pyg_compat_*.py)."""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch import Tensor


def leaf_copies(inputs: dict[str, Any]) -> dict[str, Any]:
    """Fresh leaves of the float tensors (gradients wanted), everything else as given."""
    return {
        k: v.detach().clone().requires_grad_(True)
        if isinstance(v, Tensor) and v.is_floating_point() and v.layout == torch.strided
        else v
        for k, v in inputs.items()
    }


def _close(actual: Tensor, expected: Tensor, what: str, atol: float, rtol: float) -> None:
    scale = max(1.0, float(expected.abs().max())) if expected.numel() else 1.0
    torch.testing.assert_close(
        actual, expected, atol=atol * scale, rtol=rtol, msg=lambda m: f"{what}: {m}"
    )


def compare_layers(
    pyg_layer: torch.nn.Module,
    ours: torch.nn.Module,
    inputs: dict[str, Any],
    call: Callable[[torch.nn.Module, dict[str, Any]], Tensor],
    our_inputs: dict[str, Any] | None = None,
    atol: float = 1e-5,
    rtol: float = 1e-4,
) -> Tensor:
    """Loads PyG's state into ``ours`` (strictly), runs ``call(layer, leaves)`` for both (with
    ``our_inputs`` for galfast when the forms differ, e.g. a sparse adj_t for an edge_index),
    backpropagates one fixed random upstream gradient, and compares the output and the
    gradients of every float input and parameter. Returns galfast's output."""
    ours.load_state_dict(pyg_layer.state_dict())
    results = []
    for layer, given in ((pyg_layer, inputs), (ours, our_inputs or inputs)):
        layer.zero_grad()
        leaves = leaf_copies(given)
        out = call(layer, leaves)
        upstream = torch.randn(out.shape, generator=torch.Generator().manual_seed(3))
        (out * upstream.to(out.dtype)).sum().backward()
        grads = {k: v.grad for k, v in leaves.items() if isinstance(v, Tensor) and v.requires_grad}
        params = {name: p.grad for name, p in layer.named_parameters()}
        results.append((out.detach(), grads, params))
    (out_p, grads_p, params_p), (out_o, grads_o, params_o) = results
    _close(out_o, out_p, "output", atol, rtol)
    for name in grads_p.keys() & grads_o.keys():
        if grads_p[name] is None:
            assert grads_o[name] is None or not grads_o[name].any(), name
        else:
            _close(grads_o[name], grads_p[name], f"grad {name}", atol, rtol)
    assert params_o.keys() == params_p.keys()
    for name, expected in params_p.items():
        if expected is None:
            assert params_o[name] is None or not params_o[name].any(), name
        else:
            _close(params_o[name], expected, f"grad {name}", atol, rtol)
    return out_o
