"""The fit's bar moves batch by batch within an epoch (a long epoch shows progress and a time
estimate), lands on whole epochs at each epoch's end, and falls back to epoch steps for
batches without a length."""

from __future__ import annotations

import pytest
import torch
from gal_fixtures import MeanEncoder, planted_graph
from torch import nn

from galfast import GALTrainer, SensitiveAttribute
from galfast.models import AttackerMLP
from galfast.train import NodeBatches, NodeHead, classification_loss
from galfast.train import progress as progress_module
from galfast.train.progress import batches_per_epoch

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class _RecordingBar:
    """Stands in for tqdm: records every update call, the position after each (a disabled bar
    stays put, as tqdm's does) and the postfixes."""

    made: list[_RecordingBar] = []

    def __init__(self, total, initial, disable, **kwargs):
        self.total, self.n, self.disable = total, initial, disable
        self.calls, self.positions, self.postfixes, self.closed = 0, [], [], False
        _RecordingBar.made.append(self)

    def update(self, amount):
        self.calls += 1
        if not self.disable:
            self.n += amount
            self.positions.append(self.n)

    def set_postfix(self, values):
        self.postfixes.append(values)

    def close(self):
        self.closed = True


@pytest.fixture
def bars(monkeypatch):
    _RecordingBar.made = []
    monkeypatch.setattr(progress_module, "tqdm", _RecordingBar)
    return _RecordingBar.made


def _data():
    return planted_graph(num_nodes=60, num_classes=3, degree=3, seed=1)


def _trainer(lam=1.0, pretrain_epochs=0):
    torch.manual_seed(0)
    return GALTrainer(
        MeanEncoder(_data().x.size(1), 8, 4),
        NodeHead(nn.Linear(4, 2)),
        AttackerMLP(4, 3, hidden=(8,)),
        task_loss=classification_loss,
        lam=lam,
        pretrain_epochs=pretrain_epochs,
    )


def _node_batches(batch_size):
    data = _data()
    return NodeBatches(data.train, data.y[data.train], batch_size=batch_size)


def _fit(wrap, epochs=2, progress=True, pretrain_epochs=0, batch_size=10):
    data = _data()
    trainer = _trainer(pretrain_epochs=pretrain_epochs)
    attribute = SensitiveAttribute("a", "categorical", data.a)
    batches = wrap(_node_batches(batch_size))
    trainer.fit(data.graph, batches, attribute, epochs=epochs, x=data.x, progress=progress)
    return trainer


def _positions(epochs_before, epochs_after, per_epoch):
    """Where the bar stands after each batch and after each epoch's landing."""
    positions = []
    for epoch in range(epochs_before, epochs_after):
        positions += [epoch + (k + 1) / per_epoch for k in range(per_epoch)] + [epoch + 1]
    return positions


def test_the_bar_moves_a_batch_at_a_time_and_lands_on_whole_epochs(bars):
    per_epoch = len(_node_batches(10))
    assert per_epoch > 2
    trainer = _fit(lambda b: b, epochs=2, pretrain_epochs=1)
    (bar,) = bars
    assert bar.total == 2 and bar.closed
    assert bar.positions == pytest.approx(_positions(0, 2, per_epoch), abs=1e-12)
    assert bar.n == 2  # exactly: the landing subtracts the sum of fractions
    assert [sorted(p) for p in bar.postfixes] == [["task_loss"], ["adv_loss/a", "task_loss"]]
    assert len(trainer.history) == 2


def test_batches_without_a_length_move_the_bar_at_epoch_ends(bars):
    _fit(_Unsized, epochs=2)
    (bar,) = bars
    assert bar.positions == [1, 2]


def test_a_second_fit_continues_from_the_epochs_done(bars):
    data, trainer = _data(), _trainer(lam=0.0)
    batches = _node_batches(20)
    trainer.fit(data.graph, batches, None, epochs=1, x=data.x)
    trainer.fit(data.graph, batches, None, epochs=2, x=data.x)
    first, second = bars
    assert first.positions == pytest.approx(_positions(0, 1, len(batches)), abs=1e-12)
    assert second.positions == pytest.approx(_positions(1, 2, len(batches)), abs=1e-12)


def test_no_bar_moves_when_progress_is_off(bars):
    _fit(lambda b: b, epochs=1, progress=False)
    (bar,) = bars
    # no per-batch work: only the epoch's landing reaches the (disabled) bar
    assert bar.disable and bar.positions == [] and bar.calls == 1


class _Unsized:
    """Batches that iterate but have no length (a generator's, an IterableDataset's)."""

    def __init__(self, batches):
        self.batches = batches

    def __iter__(self):
        return iter(self.batches)


class _LengthRaises(_Unsized):
    def __len__(self):
        raise TypeError("this loader has no length")


class _LengthNotACount(_Unsized):
    def __len__(self):
        return "many"


@pytest.mark.parametrize(
    "batches, expected",
    [
        ([1, 2, 3], 3),
        ([], None),
        ((b for b in [1, 2]), None),
        (_Unsized([1, 2]), None),
        (_LengthRaises([1, 2]), None),
        (_LengthNotACount([1, 2]), None),
    ],
    ids=["list", "empty", "generator", "no-length", "length-raises", "length-not-a-count"],
)
def test_batches_per_epoch(batches, expected):
    assert batches_per_epoch(batches) == expected


def test_a_length_that_raises_does_not_stop_the_fit(bars):
    _fit(_LengthRaises, epochs=1)
    (bar,) = bars
    assert bar.positions == [1]
