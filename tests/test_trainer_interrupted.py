"""A fit stopped inside an epoch (Ctrl-C, an exception from the batches or a step) leaves the
modules holding part of that epoch: a checkpoint of them is refused (a resume starts epochs
from their first batch and would replay those steps on top of themselves), a second fit warns
that it runs the epoch again, and loading a checkpoint makes the trainer whole again."""

from __future__ import annotations

import warnings

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
    return planted_graph(num_nodes=60, num_classes=3, degree=3, seed=1)


def _trainer(data):
    torch.manual_seed(0)
    encoder = MeanEncoder(data.x.size(1), 8, 4)
    head, attacker = NodeHead(nn.Linear(4, 2)), AttackerMLP(4, 3, hidden=(8,))
    return GALTrainer(encoder, head, attacker, task_loss=classification_loss, lam=1.0)


class _Interrupting:
    """The batches, with Ctrl-C once when batch `batch` (from 0) of epoch `epoch` (from 0) is
    due."""

    def __init__(self, batches, epoch, batch):
        self.batches, self.epoch, self.batch, self.seen = batches, epoch, batch, -1

    def __len__(self):
        return len(self.batches)

    def __iter__(self):
        self.seen += 1
        for index, batch in enumerate(self.batches):
            if (self.seen, index) == (self.epoch, self.batch):
                raise KeyboardInterrupt
            yield batch


def _fit(trainer, data, batches, epochs):
    attribute = SensitiveAttribute("a", "categorical", data.a)
    return trainer.fit(data.graph, batches, attribute, epochs=epochs, x=data.x, progress=False)


def _batches(data):
    return NodeBatches(data.train, data.y[data.train], batch_size=16)  # 3 batches an epoch


def _same_state(a, b):
    return all(
        torch.equal(x, y)
        for x, y in zip(a.encoder.state_dict().values(), b.encoder.state_dict().values())
    )


def test_a_checkpoint_of_a_fit_stopped_inside_an_epoch_is_refused(data, tmp_path):
    trainer = _trainer(data)
    with pytest.raises(KeyboardInterrupt):
        _fit(trainer, data, _Interrupting(_batches(data), 1, 2), 3)
    assert (trainer.epoch, trainer.step) == (1, 5)  # two of epoch 2's steps taken
    message = "stopped inside epoch 2, after 2 of its steps"
    with pytest.raises(ValueError, match=message):
        trainer.save_checkpoint(tmp_path / "c.pt")
    with pytest.raises(ValueError, match=message):
        trainer.state_dict()
    assert not (tmp_path / "c.pt").exists()


def test_a_second_fit_warns_that_it_runs_the_epoch_again_and_then_saves(data, tmp_path):
    trainer = _trainer(data)
    with pytest.raises(KeyboardInterrupt):
        _fit(trainer, data, _Interrupting(_batches(data), 1, 2), 3)
    with pytest.warns(UserWarning, match="runs that epoch again from its first batch"):
        _fit(trainer, data, _batches(data), 3)
    assert (trainer.epoch, trainer.step) == (3, 11)
    trainer.save_checkpoint(tmp_path / "c.pt")  # whole epochs since: a consistent state
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _fit(trainer, data, _batches(data), 4)


def test_loading_a_saved_epoch_continues_as_the_uninterrupted_run(data, tmp_path):
    straight = _trainer(data)
    _fit(straight, data, _batches(data), 3)

    trainer = _trainer(data)
    _fit(trainer, data, _batches(data), 1)
    trainer.save_checkpoint(tmp_path / "epoch1.pt")
    with pytest.raises(KeyboardInterrupt):
        _fit(trainer, data, _Interrupting(_batches(data), 1, 2), 3)
    trainer.load_checkpoint(tmp_path / "epoch1.pt")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _fit(trainer, data, _batches(data), 3)
    assert trainer.step == straight.step and _same_state(trainer, straight)


def test_a_fit_stopped_before_its_first_batch_changed_nothing(data, tmp_path):
    trainer = _trainer(data)
    _fit(trainer, data, _batches(data), 1)
    with pytest.raises(KeyboardInterrupt):
        _fit(trainer, data, _Interrupting(_batches(data), 0, 0), 3)  # (its own epoch count)
    trainer.save_checkpoint(tmp_path / "c.pt")
    assert trainer.epoch == 1


def test_a_fit_failing_before_any_update_changed_nothing(data, tmp_path):
    # The first batch's loss failed before any step: the epoch was still marked as stopped
    # inside it ("after 0 of its steps"), its checkpoint refused and a later fit warned.
    trainer = _trainer(data)
    failing = GALTrainer(
        trainer.encoder,
        trainer.task_head,
        trainer.attacker,
        task_loss=lambda *args: (_ for _ in ()).throw(RuntimeError("a user's loss")),
        lam=1.0,
    )
    with pytest.raises(RuntimeError, match="a user's loss"):
        _fit(failing, data, _batches(data), 2)
    failing.save_checkpoint(tmp_path / "c.pt")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _fit(failing, data, _batches(data), 0)


def test_a_later_fit_that_runs_no_epoch_does_not_warn(data):
    trainer = _trainer(data)
    with pytest.raises(KeyboardInterrupt):
        _fit(trainer, data, _Interrupting(_batches(data), 1, 2), 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _fit(trainer, data, _batches(data), 1)  # the trainer is past epoch 1: nothing runs
