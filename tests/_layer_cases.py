"""Graphs and a comparison helper shared by the tests of galfast.nn against PyG."""

from __future__ import annotations

import torch
from torch import Tensor


def _random(num_nodes: int, num_edges: int, seed: int) -> Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, num_nodes, (2, num_edges), generator=gen)


def awkward_graphs() -> dict[str, tuple[Tensor, int]]:
    """name -> (edge_index [2, E], num_nodes): the shapes that break aggregation code."""
    # More in-edges than galfast's CUDA hub threshold (_C.HUB_DEGREE), so GPU runs cover that path.
    hub = torch.arange(1, 1100)
    return {
        "random": (_random(20, 70, 0), 20),
        # Nodes 6..11 have no edges at all.
        "isolated": (_random(6, 15, 1), 12),
        # Duplicate edges, one node with two self loops, one with a single loop.
        "loops_duplicates": (
            torch.cat(
                [_random(8, 20, 2), torch.tensor([[1, 1, 2, 2, 3, 4, 4], [2, 2, 2, 2, 3, 5, 5]])],
                dim=1,
            ),
            8,
        ),
        # Node 0 receives from and sends to everyone: a degree far above the rest.
        "hub": (
            torch.cat([torch.stack([hub, torch.zeros_like(hub)]), torch.stack([hub * 0, hub])], 1),
            1100,
        ),
        "no_edges": (torch.empty(2, 0, dtype=torch.long), 5),
    }


def graph_ids() -> list[str]:
    return list(awkward_graphs())


def positive_weights(num_edges: int, seed: int = 7) -> Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(num_edges, generator=gen) + 0.5


def overwritten_self_loops(edge_index: Tensor) -> Tensor:
    """Bool mask of the self loops PyG's add_remaining_self_loops overwrites: every loop of a
    node but its last. PyG's autograd still sends them gradient (index_put's backward gathers
    for overwritten values too), although the output does not depend on them."""
    mask = torch.zeros(edge_index.size(1), dtype=torch.bool)
    loops = (edge_index[0] == edge_index[1]).nonzero().flatten().tolist()
    last = {int(edge_index[0, e]): e for e in loops}
    for e in loops:
        mask[e] = last[int(edge_index[0, e])] != e
    return mask


def assert_same_layer(
    pyg_layer: torch.nn.Module,
    ours: torch.nn.Module,
    x: Tensor,
    pyg_args: tuple,
    our_args: tuple,
    weight: Tensor | None = None,
    atol: float = 1e-5,
    rtol: float = 1e-4,
    unused_weights: Tensor | None = None,
) -> None:
    """Loads PyG's state into `ours`, runs both, and compares outputs and the gradients of x,
    every parameter and (when given) the edge weight, which must appear in both arg tuples.
    Edge weights flagged in `unused_weights` must get zero gradient from `ours` (PyG's is
    skipped there: see overwritten_self_loops)."""
    ours.load_state_dict(pyg_layer.state_dict())
    results = []
    for layer, args in ((pyg_layer, pyg_args), (ours, our_args)):
        layer.zero_grad()
        x_in = x.clone().requires_grad_(True)
        w_in = None if weight is None else weight.clone().requires_grad_(True)
        args = tuple(x_in if a is x else w_in if a is weight else a for a in args)
        out = layer(*args)
        # A fixed, non-uniform upstream gradient, so every output entry matters.
        gen = torch.Generator().manual_seed(3)
        upstream = torch.randn(out.shape, generator=gen, dtype=out.dtype)
        (out * upstream).sum().backward()
        grads = {name: p.grad for name, p in layer.named_parameters()}
        results.append((out.detach(), x_in.grad, None if w_in is None else w_in.grad, grads))
    (out_p, gx_p, gw_p, g_p), (out_o, gx_o, gw_o, g_o) = results

    def close(actual: Tensor, expected: Tensor, what: str) -> None:
        # Sums of many terms (a hub's) cancel: the error scales with the largest entry.
        scale = max(1.0, float(expected.abs().max())) if expected.numel() else 1.0
        torch.testing.assert_close(
            actual, expected, atol=atol * scale, rtol=rtol, msg=lambda m: f"{what}: {m}"
        )

    close(out_o, out_p, "output")
    close(gx_o, gx_p, "grad x")
    if weight is not None:
        if unused_weights is not None:
            assert torch.equal(gw_o[unused_weights], torch.zeros_like(gw_o[unused_weights]))
            gw_o, gw_p = gw_o[~unused_weights], gw_p[~unused_weights]
        close(gw_o, gw_p, "grad edge_weight")
    assert g_o.keys() == g_p.keys()
    for name in g_p:
        if g_p[name] is None:
            assert g_o[name] is None or not g_o[name].any(), name
        else:
            close(g_o[name], g_p[name], f"grad {name}")
