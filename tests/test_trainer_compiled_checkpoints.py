"""Checkpoints of a trainer whose modules torch.compile wraps: they hold the plain modules'
state (a compiled module's state dict prefixes every key with ``_orig_mod.``), so a run saved
compiled resumes in a plain trainer and the other way round; a checkpoint written with the
prefixed keys still loads."""

from __future__ import annotations

import pytest
import torch
from gal_fixtures import MeanEncoder, planted_graph
from torch import nn

from galfast import GALTrainer, SensitiveAttribute
from galfast.models import AttackerMLP
from galfast.train import NodeBatches, NodeHead, classification_loss

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def data():
    return planted_graph(num_nodes=40, num_classes=3, degree=3, seed=1)


def _modules(data, compiled: bool):
    torch.manual_seed(0)
    encoder = MeanEncoder(data.x.size(1), 8, 4)
    if compiled:
        torch._dynamo.reset()
        encoder = torch.compile(encoder, backend="eager")
    return encoder, NodeHead(nn.Linear(4, 2)), AttackerMLP(4, 3, hidden=(8,))


def _fit(trainer, data, epochs):
    attribute = SensitiveAttribute("a", "categorical", data.a)
    batches = NodeBatches(data.train, data.y[data.train], batch_size=8)
    trainer.fit(data.graph, batches, attribute, epochs=epochs, x=data.x, progress=False)


def _weights(trainer):
    encoder = getattr(trainer.encoder, "_orig_mod", trainer.encoder)
    return [p.detach() for p in encoder.parameters()]


@pytest.mark.parametrize(
    "saved_compiled", [True, False], ids=["compiled->plain", "plain->compiled"]
)
def test_a_checkpoint_resumes_with_or_without_torch_compile(data, tmp_path, saved_compiled):
    kwargs = dict(task_loss=classification_loss, lam=1.0)
    saver = GALTrainer(*_modules(data, saved_compiled), **kwargs)
    _fit(saver, data, 1)
    saver.save_checkpoint(tmp_path / "c.pt")
    assert not any(k.startswith("_orig_mod.") for k in saver.state_dict()["encoder"])
    modules = _modules(data, not saved_compiled)
    resumed = GALTrainer.resume(tmp_path / "c.pt", *modules, task_loss=classification_loss)
    assert resumed.epoch == 1
    assert all(torch.equal(a, b) for a, b in zip(_weights(resumed), _weights(saver)))
    _fit(saver, data, 2)
    _fit(resumed, data, 2)
    assert all(torch.equal(a, b) for a, b in zip(_weights(resumed), _weights(saver)))


def test_a_checkpoint_with_the_compiled_keys_loads(data, tmp_path):
    kwargs = dict(task_loss=classification_loss, lam=1.0)
    saver = GALTrainer(*_modules(data, True), **kwargs)
    _fit(saver, data, 1)
    state = saver.state_dict()
    state["encoder"] = saver.encoder.state_dict()  # as written before: _orig_mod.<key>
    assert all(k.startswith("_orig_mod.") for k in state["encoder"])
    plain = GALTrainer(*_modules(data, False), **kwargs)
    plain.load_state_dict(state)
    assert all(torch.equal(a, b) for a, b in zip(_weights(plain), _weights(saver)))
