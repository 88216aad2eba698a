"""GALConfig's numbers given as 0-d tensors (a value computed in torch, a sweep's
torch.linspace): taken as Python numbers, as galfast._args takes them; any other tensor refused
by name."""

import pytest
import torch

from galfast.experiments import ExperimentConfig
from galfast.train import GALConfig


def test_zero_dim_tensors_are_taken_and_stored_as_python_numbers():
    config = GALConfig(
        lam=torch.tensor(0.5),
        lr=torch.tensor(0.01, dtype=torch.float64),
        clip=torch.tensor(2),
        adv_every=torch.tensor(2),
    )
    assert (config.lam, config.lr, config.clip, config.adv_every) == (0.5, 0.01, 2, 2)
    assert type(config.lam) is float and type(config.lr) is float
    assert type(config.adv_every) is int
    assert GALConfig(lam=torch.tensor(1)).lam == 1.0
    assert ExperimentConfig(lam=torch.tensor(0.25)).lam == 0.25


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (torch.tensor(0.5, requires_grad=True), "lam must be a number, got a tensor that requires"),
        (
            torch.tensor([0.5]),
            r"lam must be a number or a 0-d tensor, got a tensor of shape \(1,\)",
        ),
        (torch.tensor([0.5, 1.0]), r"shape \(2,\)"),
        (torch.tensor(0.5 + 1j), "lam must be a real number, got a torch.complex64"),
        (torch.tensor(True), "lam must be a real number, got a torch.bool"),
        (torch.tensor(float("nan")), "lam must be a finite number"),
        (torch.tensor(-1.0), "lam must be a finite number >= 0"),
        (torch.empty((), device="meta"), "meta tensor"),
    ],
)
def test_other_tensors_are_refused_by_name(value, match):
    with pytest.raises(ValueError, match=match):
        GALConfig(lam=value)
