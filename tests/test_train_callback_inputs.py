"""Inputs users really pass to the callbacks, the optimizer factory, GALTrainer.embed and
GALTrainer.from_config, on tiny graphs: each bad one gets a ValueError naming it, raised when
the object is built or when fit starts, never after an epoch has trained or from deep inside."""

from __future__ import annotations

import pytest
import torch
from gal_fixtures import MeanEncoder, planted_graph
from torch import nn

from galfast import GALTrainer, SensitiveAttribute
from galfast.experiments.encoders import GNNStack
from galfast.nn import GCNConv
from galfast.train import (
    Callback,
    CheckpointEvery,
    EarlyStopping,
    EvaluateEvery,
    GALConfig,
    NodeBatches,
    NodeHead,
    classification_loss,
)


@pytest.fixture(scope="module")
def data():
    return planted_graph(num_nodes=20, num_classes=3, degree=3, seed=2)


def _trainer(data, **kwargs) -> GALTrainer:
    torch.manual_seed(0)
    encoder, head = MeanEncoder(data.x.size(1), 8, 4), NodeHead(nn.Linear(4, 2))
    return GALTrainer(encoder, head, nn.Linear(4, 3), task_loss=classification_loss, **kwargs)


def _fit(trainer, data, **kwargs):
    attr = SensitiveAttribute("a", "categorical", data.a)
    batches = NodeBatches(data.train, data.y[data.train])
    kwargs.setdefault("epochs", 1)
    return trainer.fit(data.graph, batches, attr, x=data.x, progress=False, **kwargs)


@pytest.mark.parametrize("name", ["run-{epoch", "{step}", "{0}", "e{epoch:q}.pt", "{epoch}}"])
def test_a_checkpoint_path_that_cannot_be_formatted_is_refused_when_built(name, tmp_path):
    # Was KeyError / IndexError / ValueError from str.format after the first epoch had trained.
    with pytest.raises(ValueError, match="is not a format string with {epoch}"):
        CheckpointEvery(str(tmp_path / name))


def test_a_checkpoint_folder_that_cannot_be_made_fails_before_the_first_epoch(data, tmp_path):
    # Was raised by the first save, after that epoch had trained.
    (tmp_path / "notes").write_text("x")
    trainer = _trainer(data)
    saver = CheckpointEvery(str(tmp_path / "notes" / "e{epoch}.pt"), every=2)
    with pytest.raises(ValueError, match="notes is a file, not a folder"):
        _fit(trainer, data, epochs=2, callbacks=[saver])
    assert trainer.epoch == 0


def test_a_checkpoint_path_may_be_a_path_object(data, tmp_path):
    # Was AttributeError: 'PosixPath' object has no attribute 'format', after the epoch.
    _fit(_trainer(data), data, callbacks=[CheckpointEvery(tmp_path / "e{epoch}.pt")])
    assert (tmp_path / "e1.pt").is_file()


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: CheckpointEvery("c.pt", every=1.5), "every"),
        (lambda: CheckpointEvery("c.pt", every=True), "every"),
        (lambda: CheckpointEvery(None), "path"),
        (lambda: EvaluateEvery(lambda t: {}, every=1.5), "every"),
        (lambda: EvaluateEvery(lambda t: {}, every=float("nan")), "every"),
        (lambda: EvaluateEvery({"val": 1.0}), "evaluate"),
        (lambda: EarlyStopping("val", patience=1.5), "patience"),
        (lambda: EarlyStopping("val", patience=True), "patience"),
        (lambda: EarlyStopping("val", min_delta=float("nan")), "min_delta"),
        (lambda: EarlyStopping(3), "monitor"),
    ],
)
def test_callback_settings_of_the_wrong_type_are_refused_when_built(build, match):
    # Each was accepted: a float or bool `every` saved on other epochs than asked (or never),
    # a NaN min_delta never improved.
    with pytest.raises(ValueError, match=match):
        build()


@pytest.mark.parametrize("returned", [None, 0.5, {"val": "high"}])
def test_evaluate_must_return_a_mapping_of_numbers(data, returned):
    # Was AttributeError: 'NoneType' object has no attribute 'items' (or float('high')).
    with pytest.raises(ValueError, match="evaluate must return"):
        _fit(_trainer(data), data, callbacks=[EvaluateEvery(lambda t: returned)])


@pytest.mark.parametrize("name", ["epoch", "adv_steps", "task_loss", "val"])
def test_evaluate_cannot_overwrite_the_record(data, tmp_path, name):
    # {"epoch": 10} rewrote the history's epochs, and CheckpointEvery then wrote every epoch's
    # checkpoint to one file, e10.0.pt; "val" is already there from the first callback.
    callbacks = [
        EvaluateEvery(lambda t: {"val": 1.0}),
        EvaluateEvery(lambda t: {name: 10}),
        CheckpointEvery(str(tmp_path / "e{epoch}.pt")),
    ]
    trainer = _trainer(data)
    with pytest.raises(ValueError, match=f"evaluate returned '{name}', already in the epoch"):
        _fit(trainer, data, callbacks=callbacks)
    assert trainer.history.column("epoch") == [1]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("factory", "match"),
    [
        (lambda params, lr: None, "must return a torch.optim.Optimizer"),
        (lambda params, lr: nn.Linear(2, 2), "must return a torch.optim.Optimizer"),
        (lambda params, lr: torch.optim.SGD(nn.Linear(2, 2).parameters(), lr=lr), "over"),
        (lambda params, lr: torch.optim.SGD(params[:1], lr=lr), "over"),
        # was TypeError "step() missing 1 required positional argument: 'closure'" at the
        # first batch, after the trainer was built
        (lambda params, lr: torch.optim.LBFGS(params, lr=lr), "LBFGS, whose step needs a closure"),
    ],
)
def test_an_optimizer_factory_must_build_an_optimizer_over_its_parameters(data, factory, match):
    # Was AttributeError at the first step, or (other parameters) a run that trained nothing.
    with pytest.raises(ValueError, match=match):
        _trainer(data, optimizer=factory)


def test_an_optimizer_factory_may_leave_frozen_parameters_out(data):
    encoder, head = MeanEncoder(data.x.size(1), 8, 4), NodeHead(nn.Linear(4, 2))
    frozen = next(encoder.parameters()).requires_grad_(False)

    def trainable_only(params, lr):
        return torch.optim.SGD([p for p in params if p.requires_grad], lr=lr)

    trainer = GALTrainer(
        encoder, head, None, task_loss=classification_loss, lam=0.0, optimizer=trainable_only
    )
    held = [p for group in trainer.task_optimizer.param_groups for p in group["params"]]
    assert all(p is not frozen for p in held) and len(held) > 0


def test_embed_refuses_features_unlike_those_of_the_fit(data):
    trainer = _trainer(data)
    _fit(trainer, data)
    other = planted_graph(num_nodes=30, num_classes=3, degree=3, seed=5)
    # Each was a RuntimeError from the encoder's matmul (node ids, or the wrong width/dtype).
    for graph, x in [
        (other.graph, None),
        (data.graph, torch.randn(20, data.x.size(1) + 2)),
        (data.graph, data.x.double()),
    ]:
        with pytest.raises(ValueError, match="x must be features like fit's"):
            trainer.embed(graph, x)
    assert trainer.embed(other.graph, other.x).shape == (30, 4)
    # The fitted graph passed explicitly embeds its own features, as embed() does.
    assert torch.equal(trainer.embed(data.graph), trainer.embed())


class _DropsARow(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.lin = nn.Linear(width, 4)

    def forward(self, x, graph):
        return self.lin(x)[:-1]


def test_embed_refuses_an_encoder_output_without_one_row_per_node(data):
    encoder = _DropsARow(data.x.size(1))
    trainer = GALTrainer(encoder, NodeHead(nn.Linear(4, 2)), task_loss=classification_loss, lam=0)
    encoder.train()
    # Was returned as is: 19 embeddings for 20 nodes.
    with pytest.raises(ValueError, match=r"\[num_nodes=20, D\]"):
        trainer.embed(data.graph, data.x)
    assert encoder.training


class _OneRowLayer(GNNStack):
    def layer(self, i, h_src, block):
        return super().layer(i, h_src, block)[:1]


def test_layerwise_embed_refuses_a_layer_without_one_row_per_destination(data):
    encoder = _OneRowLayer([GCNConv(data.x.size(1), 4)])
    trainer = GALTrainer(encoder, NodeHead(nn.Linear(4, 2)), task_loss=classification_loss, lam=0)
    # Was silent: the chunk's one row was broadcast to all its destinations.
    with pytest.raises(ValueError, match=r"encoder.layer\(0, ...\) must return one row per"):
        trainer.embed(data.graph, data.x, chunk_size=6)


def test_from_config_takes_a_dict_of_the_config_fields(data):
    torch.manual_seed(0)
    modules = MeanEncoder(data.x.size(1), 8, 4), NodeHead(nn.Linear(4, 2)), nn.Linear(4, 3)
    # Was AttributeError: 'dict' object has no attribute 'trainer_kwargs'.
    trainer = GALTrainer.from_config(
        *modules, task_loss=classification_loss, config={"lam": 0.3, "pairing": "nhop:2"}
    )
    assert trainer.settings == GALConfig(lam=0.3, pairing="nhop:2")
    with pytest.raises(ValueError, match=r"unknown keys \['weight_decay'\]"):
        GALTrainer.from_config(
            *modules, task_loss=classification_loss, config={"lam": 0.3, "weight_decay": 0.1}
        )
    with pytest.raises(ValueError, match="config must be a GALConfig"):
        GALTrainer.from_config(*modules, task_loss=classification_loss, config=None)


def test_callbacks_given_as_a_generator_or_alone_all_run(data):
    # A generator was used up by fit's type check, so no callback ran, silently; one callback
    # alone (or None) was a TypeError naming no argument.
    seen = []

    class Record(Callback):
        def on_epoch_end(self, trainer, logs):
            seen.append(logs["epoch"])

    _fit(_trainer(data), data, callbacks=(cb for cb in [Record()]))
    _fit(_trainer(data), data, callbacks=Record())
    _fit(_trainer(data), data, callbacks=None)
    assert seen == [1, 1]
    with pytest.raises(ValueError, match="callbacks must be a sequence of Callback instances"):
        _fit(_trainer(data), data, callbacks=3)
