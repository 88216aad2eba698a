"""EmbeddingEncoder reading every node in order (issue 19, a whole MovieLens run): the table
itself goes into BatchNorm, without a gather forward or a scatter backward; the output and
the gradient are those of the gather."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from galfast import Graph
from galfast.models import EmbeddingEncoder
from galfast.nn import GCNConv


class _RecordOps(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        first = args[0] if args and isinstance(args[0], torch.Tensor) else None
        self.names.append((func.__name__.split(".")[0], None if first is None else first.shape))
        return func(*args, **(kwargs or {}))


def _encoder_and_graph():
    torch.manual_seed(0)
    graph = Graph.from_edge_index(torch.randint(0, 12, (2, 40)), 12, symmetrize=True)
    return EmbeddingEncoder(12, 4, [GCNConv(4, 3)]), graph


def _gather_reference(encoder, ids, graph):
    h = encoder.norm(encoder.embedding.weight.index_select(0, ids))
    return encoder.convs[0](h, graph)


def test_every_row_in_order_skips_the_gather_with_the_same_output_and_gradient():
    encoder, graph = _encoder_and_graph()
    ids = torch.arange(12)
    grad = torch.randn(12, 3)
    with _RecordOps() as ops:
        out = encoder(ids, graph)
        out.backward(grad)
    on_table = {name for name, shape in ops.names if shape == (12, 4)}
    assert not {"index_select", "index_add", "index_add_", "scatter_add_"} & on_table
    mine = encoder.embedding.weight.grad.clone()
    encoder.zero_grad()
    reference = _gather_reference(encoder, ids, graph)
    reference.backward(grad)
    torch.testing.assert_close(out, reference, rtol=0, atol=0)
    torch.testing.assert_close(mine, encoder.embedding.weight.grad, rtol=1e-6, atol=1e-7)
    # The check is remembered per ids tensor, and redone when that tensor changes.
    assert encoder._every_row_in_order(ids)
    ids[0], ids[1] = 1, 0
    assert not encoder._every_row_in_order(ids)
    torch.testing.assert_close(encoder(ids, graph), _gather_reference(encoder, ids, graph))


@pytest.mark.parametrize(
    "ids", [torch.arange(12).flip(0), torch.arange(12).int(), torch.arange(10)], ids=str
)
def test_other_ids_still_gather(ids):
    encoder, graph = _encoder_and_graph()
    if ids.numel() != 12:
        with pytest.raises(ValueError, match="all 12 node ids"):
            encoder(ids, graph)
        return
    expected = _gather_reference(encoder, ids.long(), graph)
    torch.testing.assert_close(encoder(ids, graph), expected)


def test_module_state_is_unchanged():
    encoder, graph = _encoder_and_graph()
    before = set(encoder.state_dict())
    encoder(torch.arange(12), graph)
    assert set(encoder.state_dict()) == before
    assert isinstance(encoder.embedding, nn.Embedding)
