"""Heads whose parameters and gradients are views of flat buffers (flatten_parameters) train
bitwise as the same heads with separate tensors: HeadGradients writes autograd's gradients
into the views, and Adam on the one flat tensor updates each parameter as torch's Adam does
on the separate ones."""

import pytest
import torch
from torch import nn

from galfast.audit.flat_params import flatten_parameters
from galfast.audit.head_gradients import HeadGradients
from galfast.audit.minibatches import Adam
from galfast.audit.search import _loss
from galfast.models.attacker import AttackerMLP

# Odd sizes: parameters that end inside a SIMD vector and views that start past padding.
HEADS = [(), (5,), (7, 3), (33, 17, 9)]


def _model(hidden, outputs, dtype, seed):
    torch.manual_seed(seed)
    model = AttackerMLP(6, outputs, hidden) if hidden else nn.Linear(6, outputs)
    return model.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("hidden", HEADS, ids=str)
def test_flattening_keeps_values_and_makes_views(hidden, dtype):
    model = _model(hidden, 3, dtype, 0)
    before = [p.detach().clone() for p in model.parameters()]
    flat = flatten_parameters(model)
    assert flat.grad is not None and not flat.grad.any()
    for p, value in zip(model.parameters(), before):
        assert torch.equal(p, value) and p.is_leaf
        assert p.untyped_storage().data_ptr() == flat.untyped_storage().data_ptr()
        assert p.grad.untyped_storage().data_ptr() == flat.grad.untyped_storage().data_ptr()
        assert p.data_ptr() % 64 == 0  # every view starts where a fresh tensor would
    flat.add_(1)
    assert all(torch.equal(p, v + 1) for p, v in zip(model.parameters(), before))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("weight_decay", [0.0, 1e-3])
@pytest.mark.parametrize("hidden", HEADS, ids=str)
def test_flat_training_is_torch_adam_on_autograd(hidden, weight_decay, dtype):
    gen = torch.Generator().manual_seed(len(hidden))
    ours, theirs = _model(hidden, 4, dtype, 1), _model(hidden, 4, dtype, 1)
    flat = flatten_parameters(ours)
    mine = Adam([flat], lr=0.03, weight_decay=weight_decay)
    torchs = torch.optim.Adam(theirs.parameters(), lr=0.03, weight_decay=weight_decay)
    gradients = HeadGradients(ours, "categorical")
    for step in range(20):
        x = torch.randn(37, 6, generator=gen, dtype=dtype)
        y = torch.randint(0, 4, (37,), generator=gen)
        gradients(x, y)
        torchs.zero_grad()
        _loss(theirs(x), y, "categorical", None).backward()
        for a, b in zip(ours.parameters(), theirs.parameters()):
            assert torch.equal(a.grad, b.grad), step
        mine.step()
        torchs.step()
        for a, b in zip(ours.parameters(), theirs.parameters()):
            assert torch.equal(a, b), step


def test_mixed_parameters_are_refused():
    model = nn.Linear(3, 2)
    model.bias.data = model.bias.data.double()
    with pytest.raises(ValueError, match="one dtype"):
        flatten_parameters(model)
