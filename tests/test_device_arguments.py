"""A device argument that torch cannot read (None where a device is needed, 2.5, a bool, an
unknown name, a negative index) is a ValueError naming it, not torch's TypeError listing the
overloads of torch.device. Graph.to: tests/test_graph_validation.py; the datasets' .to:
tests/test_datasets_loader_args.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from galfast import GALTrainer, Graph
from galfast.experiments.encoders import GNNStack
from galfast.models import kg_queries
from galfast.nn import SAGEConv
from galfast.ops import sample_neighbors
from galfast.train import NodeHead, classification_loss

BAD_DEVICES = [2.5, True, "gpu", -1, [0]]


def _block():
    graph = Graph.from_edge_index(torch.tensor([[0, 1, 2], [1, 2, 0]]), 3)
    return sample_neighbors(graph, torch.tensor([0, 1]), [2], seed=0)[0]


def _trainer(device):
    encoder = GNNStack([SAGEConv(3, 4)])
    return GALTrainer(
        encoder, NodeHead(nn.Linear(4, 2)), task_loss=classification_loss, lam=0.0, device=device
    )


def _queries():
    return kg_queries(torch.tensor([[0, 0, 1], [1, 1, 2]]), 3, 2)


MOVES = {
    "Block.to": lambda device: _block().to(device),
    "GALTrainer(device=)": _trainer,
    "KGQueries.to": lambda device: _queries().to(device),
}


@pytest.mark.parametrize("device", BAD_DEVICES, ids=repr)
@pytest.mark.parametrize("move", MOVES)
def test_a_device_torch_cannot_read_is_named(move, device):
    with pytest.raises(ValueError, match="device must be a torch.device"):
        MOVES[move](device)


@pytest.mark.parametrize("device", ["cpu", torch.device("cpu"), np.str_("cpu")], ids=repr)
@pytest.mark.parametrize("move", MOVES)
def test_cpu_in_any_spelling_is_the_cpu(move, device):
    moved = MOVES[move](device)
    where = moved.queries if move == "KGQueries.to" else moved  # KGQueries has no .device
    assert where.device == torch.device("cpu")
