"""Training steps replayed from CUDA graphs: the static-buffer plumbing on the CPU (with a
stand-in for the capture) and the real capture against eager training on a GPU."""

import warnings
from collections import namedtuple
from dataclasses import dataclass

import pytest
import torch
from gal_fixtures import MeanEncoder, planted_graph
from torch import nn

from galfast import GALTrainer, SensitiveAttribute
from galfast.models import AttackerMLP, EmbeddingEncoder
from galfast.nn import GCNConv
from galfast.train import NodeBatch, NodeBatches, NodeHead, classification_loss
from galfast.train.step_graphs import NotCapturable, StepGraphs, flatten_tensors, rebuild

Pair = namedtuple("Pair", "left right")


@dataclass(frozen=True)
class Frozen:
    a: torch.Tensor
    tag: str


class ReRunGraphs(StepGraphs):
    """A CPU stand-in for CUDA graphs with the same contract: capturing records the step on
    its static inputs without running it; a replay runs it on whatever the static inputs
    hold then."""

    def _capture(self, step, static_inputs):
        return lambda: step(static_inputs)


class FailingGraphs(StepGraphs):
    def _capture(self, step, static_inputs):
        raise RuntimeError("operation not permitted when stream is capturing")


@pytest.fixture(scope="module")
def data():
    return planted_graph(num_nodes=60, num_classes=3, degree=3, seed=1)


def test_flatten_and_rebuild_round_trip_nested_batches():
    t = [torch.arange(3), torch.ones(2), torch.zeros(1, 2), torch.full((2,), 7.0)]
    batch = {"pair": Pair(t[0], [t[1], 3]), "frozen": Frozen(t[2], "x"), "rest": (t[3], None)}
    leaves, structure = flatten_tensors(batch)
    assert [id(x) for x in leaves] == [id(x) for x in t]
    copies = [x.clone() + 1 for x in leaves]
    back = rebuild(structure, copies)
    assert isinstance(back["pair"], Pair) and back["pair"].right[1] == 3
    assert isinstance(back["frozen"], Frozen) and back["frozen"].tag == "x"
    assert back["rest"][1] is None and isinstance(back["rest"], tuple)
    assert torch.equal(back["frozen"].a, t[2] + 1)
    assert flatten_tensors(back)[1] == structure


def test_flatten_refuses_objects_it_cannot_rebuild():
    with pytest.raises(NotCapturable, match="object"):
        flatten_tensors([torch.ones(1), object()])


def _doubling_step(calls):
    def step(batch):
        calls.append(batch)
        return {"out": batch.a * 2}

    return step


def test_warm_up_eagerly_then_capture_once_and_replay_with_new_inputs():
    graphs, calls = ReRunGraphs("cpu", warmup=2), []
    step = _doubling_step(calls)
    inputs = [Frozen(torch.full((3,), float(i)), "k") for i in range(5)]
    results = [graphs.run("s", step, batch) for batch in inputs]
    assert graphs.counts == {"eager": 2, "captured": 1, "replayed": 3}
    # Each run saw its own inputs and kept its own outputs (replays return clones).
    for i, result in enumerate(results):
        assert torch.equal(result["out"], torch.full((3,), 2.0 * i))
    # Eager runs read the callers' batches; replays the one static batch, a copy.
    assert calls[:2] == inputs[:2] and len(calls) == 5
    static = calls[2]
    assert all(c is static for c in calls[2:]) and all(static.a is not b.a for b in inputs)


def test_each_signature_is_captured_separately_and_up_to_the_limit():
    graphs = ReRunGraphs("cpu", warmup=0, max_graphs=2)
    step = _doubling_step([])
    for size in (3, 4, 3, 5, 5):
        out = graphs.run("s", step, Frozen(torch.ones(size), "k"))
        assert torch.equal(out["out"], torch.full((size,), 2.0))
    graphs.run("s", step, Frozen(torch.ones(3), "other tag"))  # a constant is part of it
    assert graphs.counts == {"eager": 3, "captured": 2, "replayed": 3}
    graphs.clear()
    assert graphs.counts == {"eager": 0, "captured": 0, "replayed": 0}


def test_a_failed_capture_warns_and_runs_that_signature_eagerly_from_then_on():
    graphs, calls = FailingGraphs("cpu", warmup=1), []
    step = _doubling_step(calls)
    graphs.run("s", step, Frozen(torch.ones(2), "k"))
    with pytest.warns(RuntimeWarning, match="'s' step could not be captured"):
        out = graphs.run("s", step, Frozen(torch.ones(2), "k"))
    assert torch.equal(out["out"], torch.full((2,), 2.0)) and len(calls) == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        graphs.run("s", step, Frozen(torch.ones(2), "k"))
    assert graphs.counts["eager"] == 3 and graphs.counts["captured"] == 0


def _trainer(data, distance, device="cpu", cuda_graphs=False):
    torch.manual_seed(0)
    return GALTrainer(
        MeanEncoder(data.x.size(1), 8, 4),
        NodeHead(nn.Linear(4, 2)),
        AttackerMLP(4, 3, hidden=(8,)),
        task_loss=classification_loss,
        distance=distance,
        lam=0.5,
        adv_batch_size=16,
        device=device,
        cuda_graphs=cuda_graphs,
    )


def _fit(trainer, data, epochs=3):
    # 42 training nodes in batches of 16: two full batches and a partial one every epoch.
    batches = NodeBatches(data.train, data.y[data.train], batch_size=16)
    attr = SensitiveAttribute("a", "categorical", data.a)
    trainer.fit(data.graph, batches, attr, epochs=epochs, x=data.x, progress=False)
    return trainer


def _params(trainer):
    return [p.detach().cpu() for p in trainer.encoder.parameters()] + [
        p.detach().cpu() for p in trainer.attacker.parameters()
    ]


@pytest.mark.parametrize("distance", ["tv", "wasserstein"])
def test_trainer_steps_through_static_buffers_train_exactly_like_eager_ones(data, distance):
    eager = _fit(_trainer(data, distance), data)
    replayed = _trainer(data, distance)
    replayed._step_graphs = ReRunGraphs("cpu")
    _fit(replayed, data)
    counts = replayed._step_graphs.counts
    assert counts["captured"] == 3 and counts["replayed"] > counts["eager"]
    for mine, theirs in zip(_params(replayed), _params(eager)):
        assert torch.equal(mine, theirs)
    assert [r["task_loss"] for r in replayed.history] == [r["task_loss"] for r in eager.history]


def test_cuda_graphs_need_a_cuda_device(data):
    with pytest.raises(ValueError, match="cuda_graphs=True needs a CUDA device"):
        _trainer(data, "tv", cuda_graphs=True)


@pytest.mark.cuda
@pytest.mark.parametrize("distance", ["tv", "wasserstein"])
def test_cuda_graph_training_matches_eager_training(data, distance):
    eager = _fit(_trainer(data, distance, device="cuda"), data)
    graphed = _fit(_trainer(data, distance, device="cuda", cuda_graphs=True), data)
    counts = graphed._step_graphs.counts
    assert counts["captured"] == 3 and counts["replayed"] > counts["eager"]
    for mine, theirs in zip(_params(graphed), _params(eager)):
        torch.testing.assert_close(mine, theirs, atol=1e-5, rtol=1e-4)
    for a, b in zip(graphed.history, eager.history):
        assert a["task_loss"] == pytest.approx(b["task_loss"], rel=1e-4)


@pytest.mark.cuda
def test_cuda_graphs_with_galfast_layers_batch_norm_and_a_resume(data, tmp_path):
    def build():
        torch.manual_seed(0)
        num_nodes = data.graph.num_nodes
        encoder = EmbeddingEncoder(num_nodes, 8, convs=[GCNConv(8, 8), GCNConv(8, 4)], max_norm=1)
        return GALTrainer(
            encoder,
            NodeHead(nn.Linear(4, 2)),
            AttackerMLP(4, 3, hidden=(8,)),
            task_loss=classification_loss,
            lam=0.5,
            device="cuda",
            cuda_graphs=True,
        )

    def fit(trainer, epochs):
        batches = NodeBatches(data.train, data.y[data.train], batch_size=16)
        attr = SensitiveAttribute("a", "categorical", data.a)
        trainer.fit(data.graph, batches, attr, epochs=epochs, progress=False)

    whole = build()
    fit(whole, 4)
    first = build()
    fit(first, 2)
    first.save_checkpoint(tmp_path / "run.pt")
    resumed = build().load_checkpoint(tmp_path / "run.pt")
    fit(resumed, 4)
    assert resumed._step_graphs.counts["replayed"] > 0
    torch.testing.assert_close(resumed.embed(), whole.embed(), atol=1e-5, rtol=1e-4)


class _SyncingEncoder(MeanEncoder):
    def forward(self, x, graph):
        z = super().forward(x, graph)
        if z.abs().max().item() > 1e9:  # a host read: not allowed while capturing
            raise AssertionError
        return z


@pytest.mark.cuda
def test_a_step_that_syncs_with_the_host_falls_back_to_eager_with_a_warning(data):
    torch.manual_seed(0)
    trainer = GALTrainer(
        _SyncingEncoder(data.x.size(1), 8, 4),
        NodeHead(nn.Linear(4, 2)),
        task_loss=classification_loss,
        lam=0,
        device="cuda",
        cuda_graphs=True,
    )
    batches = [NodeBatch(data.train[:16], data.y[data.train[:16]])] * 4
    with pytest.warns(RuntimeWarning, match="could not be captured"):
        trainer.fit(data.graph, batches, epochs=1, x=data.x, progress=False)
    assert trainer._step_graphs.counts == {"eager": 4, "captured": 0, "replayed": 0}
    assert trainer.history[-1]["task_steps"] == 4


def test_captured_steps_are_kept_across_fits_on_the_same_inputs_only(data):
    trainer = _trainer(data, "tv")
    trainer._step_graphs = ReRunGraphs("cpu")
    batches = NodeBatches(data.train, data.y[data.train], batch_size=16)
    attr = SensitiveAttribute("a", "categorical", data.a)

    def counts():
        return trainer._step_graphs.counts["eager"], trainer._step_graphs.counts["captured"]

    # Per epoch: two task batches of 16, one of 10, and three adversary steps.
    trainer.fit(data.graph, batches, attr, epochs=2, x=data.x, progress=False)
    assert counts() == (6, 2)  # the 10-batch is still warming up
    trainer.fit(data.graph, batches, attr, epochs=3, x=data.x, progress=False)
    assert counts() == (6, 3)  # kept: no new warm-up
    other = SensitiveAttribute("a", "categorical", data.a.flip(0))
    trainer.fit(data.graph, batches, other, epochs=4, x=data.x, progress=False)
    assert counts() == (5, 1)  # cleared: every signature warmed up again
