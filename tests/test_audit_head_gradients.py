"""HeadGradients writes bitwise the gradients loss.backward() writes, for every loss the audit
trains with (plain and class-weighted), every head shape it builds, odd batch sizes and both
float widths."""

import pytest
import torch
from torch import nn

from galfast.audit.head_gradients import HeadGradients
from galfast.audit.search import _class_weights, _loss
from galfast.models.attacker import AttackerMLP

# (kind, outputs): a binary attribute has one logit (two scores are accepted too).
KINDS = [
    ("binary", 1),
    ("binary", 2),
    ("categorical", 4),
    ("multilabel", 3),
    ("continuous", 1),
    ("continuous", 2),
]
HIDDEN = [(), (5,), (7, 3), (4, 6, 2)]


def _targets(kind, outputs, n, gen):
    if kind in ("binary", "categorical"):
        classes = 2 if kind == "binary" else outputs
        return torch.randint(0, classes, (n,), generator=gen)
    if kind == "multilabel":
        return torch.randint(0, 2, (n, outputs), generator=gen).float()
    return torch.randn(n, outputs, generator=gen)


def _autograd_grads(model, loss):
    model.zero_grad(set_to_none=True)
    loss.backward()
    return [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n", [1, 3, 64, 257])
@pytest.mark.parametrize("hidden", HIDDEN, ids=str)
@pytest.mark.parametrize(("kind", "outputs"), KINDS)
def test_gradients_are_autograds(kind, outputs, hidden, n, dtype):
    gen = torch.Generator().manual_seed(n + 10 * len(hidden))
    torch.manual_seed(3)
    model = AttackerMLP(5, outputs, hidden).to(dtype) if hidden else nn.Linear(5, outputs)
    model = model.to(dtype)
    x = torch.randn(n, 5, generator=gen, dtype=dtype) * 3
    y = _targets(kind, outputs, n, gen)
    weights = [None]
    if kind == "categorical" or (kind == "binary" and outputs == 1):
        weights.append(_class_weights(kind, y, outputs))
    for w in weights:
        want = _autograd_grads(model, _loss(model(x), y, kind, w))
        model.zero_grad(set_to_none=True)
        HeadGradients(model, kind, w)(x, y)
        for p, g in zip(model.parameters(), want):
            assert p.grad.dtype == g.dtype and p.grad.shape == g.shape
            assert torch.equal(p.grad, g)


def test_gradients_match_after_training_steps():
    # The weights an optimizer moved (no longer freshly initialised) give the same equality.
    torch.manual_seed(0)
    model = AttackerMLP(8, 1, (16, 16))
    twin = AttackerMLP(8, 1, (16, 16))
    twin.load_state_dict(model.state_dict())
    gen = torch.Generator().manual_seed(1)
    x, y = torch.randn(512, 8, generator=gen), torch.randint(0, 2, (512,), generator=gen)
    opt_a = torch.optim.Adam(model.parameters(), lr=0.05)
    opt_b = torch.optim.Adam(twin.parameters(), lr=0.05)
    step = HeadGradients(twin, "binary")
    for start in range(0, 512, 64):
        xb, yb = x[start : start + 64], y[start : start + 64]
        opt_a.zero_grad()
        _loss(model(xb), yb, "binary", None).backward()
        opt_a.step()
        opt_b.zero_grad()
        step(xb, yb)
        opt_b.step()
    for a, b in zip(model.parameters(), twin.parameters()):
        assert torch.equal(a, b)


@pytest.mark.parametrize(
    "model",
    [
        AttackerMLP(4, 2, (8,), dropout=0.5),
        nn.Linear(4, 2, bias=False),
        nn.Sequential(nn.Linear(4, 2)),
    ],
    ids=["dropout", "no-bias", "sequential"],
)
def test_refuses_heads_it_cannot_differentiate(model):
    with pytest.raises(ValueError, match="HeadGradients takes"):
        HeadGradients(model, "binary")


def test_class_weights_follow_each_calls_dtype():
    # One HeadGradients for float32 then float64 batches: the float64 step uses the given
    # (double) weights, not ones rounded through float32 by the step before.
    gen = torch.Generator().manual_seed(0)
    y = torch.randint(0, 3, (40,), generator=gen)
    weights = torch.tensor([1 / 3, 0.1, 2.0], dtype=torch.float64)
    torch.manual_seed(1)
    model = AttackerMLP(5, 3, (4,))
    gradients = HeadGradients(model, "categorical", weights)
    for dtype in (torch.float32, torch.float64):
        model = model.to(dtype)  # the same Parameter objects, converted
        x = torch.randn(40, 5, generator=gen, dtype=dtype)
        want = _autograd_grads(model, _loss(model(x), y, "categorical", weights))
        model.zero_grad(set_to_none=True)
        gradients(x, y)
        assert all(torch.equal(p.grad, g) for p, g in zip(model.parameters(), want)), dtype
