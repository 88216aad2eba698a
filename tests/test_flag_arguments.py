"""Flags across the public API take True or False (NumPy's too): the string "no", None or a
count read by its truth would switch an option without a word (download="no" downloaded,
progress="no" drew the bar, batch_norm=0 built no norm). The audit's progress flag is tested
in tests/test_audit_inputs.py, the layers' in tests/test_nn_constructor_inputs.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gal_fixtures import planted_graph
from torch import nn

from galfast import GALTrainer
from galfast.datasets import fb15k_237, movielens, planetoid, qm9, wn18rr
from galfast.experiments.encoders import GNNStack
from galfast.models import MPNN, ConvEDecoder, EmbeddingEncoder
from galfast.nn import SAGEConv
from galfast.train import NodeBatches, NodeHead, classification_loss

NOT_FLAGS = ["no", None, 1, 0.0]


@pytest.mark.parametrize("value", NOT_FLAGS)
@pytest.mark.parametrize(
    "load",
    [
        lambda root, value: planetoid("citeseer", root=root, download=value),
        lambda root, value: movielens("1m", root=root, download=value),
        lambda root, value: qm9(root=root, download=value),
        lambda root, value: wn18rr(root=root, download=value),
        lambda root, value: fb15k_237(root=root, download=value),
    ],
    ids=["planetoid", "movielens", "qm9", "wn18rr", "fb15k_237"],
)
def test_loaders_refuse_a_download_flag_that_is_no_bool(tmp_path, load, value):
    with pytest.raises(ValueError, match="download must be a bool"):
        load(tmp_path, value)


@pytest.fixture(scope="module")
def planted():
    return planted_graph(num_nodes=60, seed=3)


def _trainer(planted, **kwargs):
    torch.manual_seed(0)
    encoder = GNNStack([SAGEConv(planted.x.size(1), 4)])
    head = NodeHead(nn.Linear(4, 2))
    return GALTrainer(encoder, head, task_loss=classification_loss, lam=0.0, **kwargs)


@pytest.mark.parametrize("value", NOT_FLAGS)
def test_trainer_flags_are_true_or_false(planted, value):
    with pytest.raises(ValueError, match="cuda_graphs must be a bool"):
        _trainer(planted, cuda_graphs=value)
    batches = NodeBatches(planted.train, planted.y[planted.train], batch_size=20)
    with pytest.raises(ValueError, match="progress must be a bool"):
        _trainer(planted).fit(planted.graph, batches, epochs=1, x=planted.x, progress=value)


def test_a_numpy_progress_flag_trains_as_a_python_one(planted):
    batches = NodeBatches(planted.train, planted.y[planted.train], batch_size=20)
    runs = []
    for progress in (False, np.False_):
        trainer = _trainer(planted)
        trainer.fit(planted.graph, batches, epochs=1, x=planted.x, progress=progress)
        runs.append(trainer.embed(planted.graph, planted.x))
    torch.testing.assert_close(runs[0], runs[1], rtol=0, atol=0)


@pytest.mark.parametrize("value", NOT_FLAGS)
def test_model_flags_are_true_or_false(value):
    with pytest.raises(ValueError, match="batch_norm must be a bool"):
        EmbeddingEncoder(4, 3, batch_norm=value)
    with pytest.raises(ValueError, match="conv_bias must be a bool"):
        ConvEDecoder(5, dim=4, k_w=2, k_h=2, num_filters=2, kernel_size=1, conv_bias=value)
    model = MPNN(in_channels=3, edge_channels=2, dim=4, edge_hidden=4)
    x, edge_attr = torch.randn(4, 3), torch.randn(4, 2)
    edge_index, batch = torch.tensor([[0, 1, 2, 3], [1, 0, 3, 2]]), torch.tensor([0, 0, 1, 1])
    with pytest.raises(ValueError, match="return_embedding must be a bool"):
        model(x, edge_index, edge_attr, batch, return_embedding=value)


def test_numpy_model_flags_build_the_python_flags_model():
    assert isinstance(EmbeddingEncoder(4, 3, batch_norm=np.False_).norm, nn.Identity)
    decoder = ConvEDecoder(5, dim=4, k_w=2, k_h=2, num_filters=2, kernel_size=1, conv_bias=np.True_)
    assert decoder.conv.bias is not None
