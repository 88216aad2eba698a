"""GALConfig: one checked set of hyperparameters for the trainer, its checkpoints and the CLI."""

import dataclasses

import numpy as np
import pytest
import torch
from gal_fixtures import MeanEncoder, planted_graph
from torch import nn

from galfast import GALTrainer, SensitiveAttribute
from galfast.gal import Pairing
from galfast.models import AttackerMLP
from galfast.train import GALConfig, NodeBatches, NodeHead, classification_loss


@pytest.fixture(scope="module")
def data():
    return planted_graph(num_nodes=40, num_classes=3, degree=3, seed=2)


def _modules(data, seed=0):
    torch.manual_seed(seed)
    return MeanEncoder(data.x.size(1), 8, 4), NodeHead(nn.Linear(4, 2)), AttackerMLP(4, 3)


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("distance", "kl", "distance"),
        ("lam", -1, "lam"),
        ("lam", float("nan"), "lam"),
        ("adv_every", 0, "adv_every"),
        ("adv_every", True, "adv_every"),
        ("adv_schedule", "before", "adv_schedule"),
        ("adv_batch_size", 0, "adv_batch_size"),
        ("pretrain_epochs", 1.5, "pretrain_epochs"),
        ("lr", 0, "lr"),
        ("clip", -0.1, "clip"),
        ("seed", -1, "seed"),
        ("optimizer", "lbfgs", "optimizer"),
        ("walk_mode", "lazy", "walk_mode"),
        ("pairing", "nhop:0", "nhop"),
    ],
)
def test_each_bad_value_is_refused_by_the_config_and_the_trainer_alike(data, field, value, match):
    with pytest.raises(ValueError, match=match):
        GALConfig(**{field: value})
    with pytest.raises(ValueError, match=match):
        GALTrainer(*_modules(data), task_loss=classification_loss, **{field: value})


def test_an_adversary_learning_rate_past_the_floats_is_refused(data):
    # lam and lr are each finite, but the adversary's learning rate, their product, is not
    with pytest.raises(ValueError, match=r"lr \* lam, the adversary's learning rate"):
        GALConfig(lr=10.0, lam=1e308)
    with pytest.raises(ValueError, match=r"lr \* lam"):
        GALTrainer(*_modules(data), task_loss=classification_loss, lr=10.0, lam=1e308)
    assert GALConfig(lr=0.01, lam=1e308).lam == 1e308


def test_numpy_numbers_are_taken_and_stored_as_python_numbers():
    # np.float32 lam or np.int64 adv_every (a sweep's grid) were refused as "not a number"
    config = GALConfig(
        lam=np.float32(0.5), lr=np.float64(0.01), adv_every=np.int64(2), pretrain_epochs=np.int8(1)
    )
    assert config.lam == 0.5 and type(config.lam) is float and type(config.lr) is float
    assert (config.adv_every, config.pretrain_epochs) == (2, 1)
    assert type(config.adv_every) is int and type(config.pretrain_epochs) is int


def test_instead_schedule_needs_two_batches_per_adversary_step():
    with pytest.raises(ValueError, match="adv_every >= 2"):
        GALConfig(adv_schedule="instead", adv_every=1)
    assert GALConfig(adv_schedule="instead", adv_every=2).adv_every == 2


def test_config_is_normalised_and_frozen():
    config = GALConfig(lam=1, pairing=("nhop", 2))
    assert config.pairing == Pairing(2) and isinstance(config.lam, float)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.lam = 0.0  # type: ignore[misc]


def test_from_config_equals_keyword_arguments(data):
    config = GALConfig(lam=0.3, pairing="neighbor", adv_batch_size=7, seed=4, lr=0.05)
    by_config = GALTrainer.from_config(
        *_modules(data), task_loss=classification_loss, config=config
    )
    by_keywords = GALTrainer(
        *_modules(data),
        task_loss=classification_loss,
        lam=0.3,
        pairing="neighbor",
        adv_batch_size=7,
        seed=4,
        lr=0.05,
    )
    assert by_config.settings == by_keywords.settings == config
    assert by_config.config == by_keywords.config


def test_checkpoint_config_keeps_its_format(data):
    trainer = GALTrainer(
        *_modules(data), task_loss=classification_loss, lam=0.5, pairing=("nhop", 3)
    )
    assert trainer.config == {
        "distance": "tv",
        "lam": 0.5,
        "pairing": "nhop:3",
        "adv_every": 1,
        "adv_schedule": "after",
        "adv_batch_size": None,
        "pretrain_epochs": 0,
        "lr": 0.01,
        "clip": 1.0,
        "seed": 0,
        "optimizer": "adam",
        "walk_mode": "paper",
        "adv_update": "separate",
    }


def test_a_checkpoint_in_the_earlier_layout_still_resumes(data, tmp_path):
    """Checkpoints written before GALConfig held the same plain dict under "config": build one
    by hand (an optimizer factory saved as None) and resume from it."""
    encoder, head, attacker = _modules(data)
    trainer = GALTrainer(
        encoder,
        head,
        attacker,
        task_loss=classification_loss,
        lam=0.5,
        optimizer=lambda params, lr: torch.optim.SGD(params, lr=lr),
    )
    attr = SensitiveAttribute("a", "categorical", data.a)
    batches = NodeBatches(data.train, data.y[data.train])
    trainer.fit(data.graph, batches, attr, epochs=1, x=data.x, progress=False)
    state = trainer.state_dict()
    state["config"] = {
        "distance": "tv",
        "lam": 0.5,
        "pairing": "node",
        "adv_every": 1,
        "adv_schedule": "after",
        "adv_batch_size": None,
        "pretrain_epochs": 0,
        "lr": 0.01,
        "clip": 1.0,
        "seed": 0,
        "optimizer": None,
        "walk_mode": "paper",
    }
    torch.save(state, tmp_path / "old.pt")
    with pytest.raises(ValueError, match="optimizer factory"):
        GALTrainer.resume(tmp_path / "old.pt", *_modules(data, 1), task_loss=classification_loss)
    resumed = GALTrainer.resume(
        tmp_path / "old.pt",
        *_modules(data, 1),
        task_loss=classification_loss,
        optimizer=lambda params, lr: torch.optim.SGD(params, lr=lr),
    )
    assert resumed.epoch == 1 and resumed.settings.lam == 0.5
    assert torch.equal(resumed.embed(data.graph, data.x), trainer.embed(data.graph, data.x))
