"""The trainer's lean fused Adam / AdamW: bitwise torch's fused step, torch's step for any
other configuration, no torch._dynamo import."""

import pytest
import torch
from same_galfast import run_python

from galfast.train.lean_adam import LeanAdam, LeanAdamW
from galfast.train.optimizers import make_optimizer


def _params(seed, dtypes=(torch.float32, torch.float32, torch.float32), device="cpu"):
    gen = torch.Generator().manual_seed(seed)
    shapes = [(7, 5), (5,), (3, 4, 2)]
    return [
        torch.randn(shape, generator=gen, dtype=dtype).to(device).requires_grad_()
        for shape, dtype in zip(shapes, dtypes)
    ]


def _train(opt_cls, params, steps=6, skip=(), edit=None, **kwargs):
    """Runs ``steps`` steps of a fixed loss; parameter ``i`` gets no gradient at step ``s`` for
    ``(s, i)`` in ``skip``; ``edit(opt, s)`` may change the optimizer before step ``s``."""
    opt = opt_cls(params, **kwargs)
    for s in range(steps):
        if edit is not None:
            edit(opt, s)
        opt.zero_grad()
        loss = sum(
            ((p.to(torch.float64) - 0.1 * i) ** 2).sum() * (1 + s)
            for i, p in enumerate(params)
            if (s, i) not in skip
        )
        loss.backward()
        opt.step()
    return opt


@pytest.mark.parametrize(
    "lean, torch_cls, kwargs",
    [
        (LeanAdam, torch.optim.Adam, {"lr": 0.01}),
        (LeanAdam, torch.optim.Adam, {"lr": 0.03, "weight_decay": 0.1, "betas": (0.8, 0.9)}),
        (
            LeanAdam,
            torch.optim.Adam,
            {"lr": 0.01, "decoupled_weight_decay": True, "weight_decay": 0.2},
        ),
        (LeanAdamW, torch.optim.AdamW, {"lr": 0.02, "weight_decay": 0.05}),
    ],
)
@pytest.mark.parametrize(
    "device, capturable",
    [("cpu", False), pytest.param("cuda", False, marks=pytest.mark.cuda)]
    + [pytest.param("cuda", True, marks=pytest.mark.cuda)],
)
def test_bitwise_torch_fused(lean, torch_cls, kwargs, device, capturable):
    skip = {(1, 0), (2, 2), (3, 0)}  # a parameter without a gradient is not stepped
    ours = _params(0, device=device)
    theirs = _params(0, device=device)
    if capturable:  # as make_capturable leaves the groups of a trainer with CUDA graphs
        kwargs = {**kwargs, "capturable": True}
    a = _train(lean, ours, skip=skip, fused=True, **kwargs)
    b = _train(torch_cls, theirs, skip=skip, fused=True, **kwargs)
    for p, q in zip(ours, theirs):
        assert torch.equal(p, q)
    for p, q in zip(ours, theirs):
        for key in ("step", "exp_avg", "exp_avg_sq"):
            assert torch.equal(a.state[p][key], b.state[q][key])
    assert isinstance(a, torch_cls)


def test_param_groups_and_lr_edits_are_read_each_step():
    def edit(opt, s):
        opt.param_groups[0]["lr"] = 0.01 * (s + 1)
        opt.param_groups[1]["weight_decay"] = 0.1 * s

    def groups(params):
        return [{"params": params[:2]}, {"params": params[2:], "lr": 0.5}]

    ours, theirs = _params(1), _params(1)
    _train(lambda ps, **k: LeanAdam(groups(ps), **k), ours, edit=edit, lr=0.1, fused=True)
    _train(lambda ps, **k: torch.optim.Adam(groups(ps), **k), theirs, edit=edit, lr=0.1, fused=True)
    for p, q in zip(ours, theirs):
        assert torch.equal(p, q)


@pytest.mark.parametrize("option", ["amsgrad", "maximize"])
def test_other_configurations_take_torchs_step(option):
    def edit(opt, s):  # before the first step: torch's amsgrad needs its state from step 1
        if s == 0:
            opt.param_groups[0][option] = True

    ours, theirs = _params(2), _params(2)
    _train(LeanAdam, ours, edit=edit, lr=0.01, fused=True)
    _train(torch.optim.Adam, theirs, edit=edit, lr=0.01, fused=True)
    for p, q in zip(ours, theirs):
        assert torch.equal(p, q)


def test_mixed_dtypes_take_torchs_step():
    dtypes = (torch.float32, torch.float64, torch.float32)
    ours, theirs = _params(3, dtypes), _params(3, dtypes)
    _train(LeanAdam, ours, lr=0.01, fused=True)
    _train(torch.optim.Adam, theirs, lr=0.01, fused=True)
    for p, q in zip(ours, theirs):
        assert torch.equal(p, q)


def test_hooks_run_once_a_step_on_both_paths():
    calls = []
    params = _params(4)
    opt = LeanAdam(params, lr=0.01, fused=True)
    opt.register_step_pre_hook(lambda *a: calls.append("pre"))
    opt.register_step_post_hook(lambda *a: calls.append("post"))
    sum(p.sum() for p in params).backward()
    opt.step()
    assert calls == ["pre", "post"]
    opt.param_groups[0]["maximize"] = True
    opt.step()
    assert calls == ["pre", "post"] * 2


def test_state_dict_round_trips_with_torch_adam():
    ours = _params(5)
    a = _train(LeanAdam, ours, lr=0.01, fused=True)
    copy = [p.detach().clone().requires_grad_() for p in ours]
    b = torch.optim.Adam(copy, lr=0.01, fused=True)
    b.load_state_dict(a.state_dict())
    c = LeanAdam([p.detach().clone().requires_grad_() for p in ours], lr=0.01, fused=True)
    c.load_state_dict(b.state_dict())
    for p, q in zip(a.param_groups[0]["params"], c.param_groups[0]["params"]):
        assert torch.equal(a.state[p]["exp_avg_sq"], c.state[q]["exp_avg_sq"])


def test_scheduler_drives_the_lean_step():
    params = _params(6)
    opt = LeanAdam(params, lr=0.1, fused=True)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    sum(p.sum() for p in params).backward()
    opt.step()
    sched.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(0.05)


def test_closure_and_sparse_gradient():
    params = _params(7)
    opt = LeanAdam(params, lr=0.01, fused=True)

    def closure():
        opt.zero_grad()
        loss = sum(p.square().sum() for p in params)
        loss.backward()
        return loss

    assert opt.step(closure) is not None
    emb = torch.nn.Embedding(4, 2, sparse=True)
    opt = LeanAdam(emb.parameters(), lr=0.01, fused=True)
    emb(torch.tensor([1])).sum().backward()
    with pytest.raises(RuntimeError, match="sparse gradients"):
        opt.step()


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_make_optimizer_builds_lean_on_one_device(device):
    params = _params(8, device=device)
    assert type(make_optimizer("adam", params, 0.01)) is LeanAdam
    assert type(make_optimizer("adamw", params, 0.01)) is LeanAdamW


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_training_imports_no_dynamo(device):
    # On a GPU as a trainer with CUDA graphs leaves the optimizer (make_capturable): still lean.
    capturable = "opt.param_groups[0]['capturable'] = True\n" if device == "cuda" else ""
    code = (
        "import sys, torch\n"
        "from galfast.train.optimizers import make_optimizer\n"
        f"p = torch.zeros(3, device={device!r}, requires_grad=True)\n"
        "opt = make_optimizer('adam', [p], 0.1)\n"
        f"{capturable}"
        "for _ in range(2):\n"
        "    opt.zero_grad(); (p - 1).square().sum().backward(); opt.step()\n"
        "assert float(p[0]) > 0\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    out = run_python(code)
    assert out.stdout.strip() == "False"


def test_profiler_ranges_only_while_recording():
    params = _params(9)
    opt = LeanAdam(params, lr=0.01, fused=True)
    sum(p.sum() for p in params).backward()
    with torch.profiler.profile() as prof:
        opt.step()
        opt.zero_grad()
    names = {event.name for event in prof.events()}
    assert "Optimizer.step#LeanAdam.step" in names
    assert "Optimizer.zero_grad#LeanAdam.zero_grad" in names
    assert all(p.grad is None for p in params)


def test_zero_grad_without_set_to_none_keeps_zeroed_tensors():
    params = _params(10)
    opt = LeanAdam(params, lr=0.01, fused=True)
    sum(p.sum() for p in params).backward()
    opt.zero_grad(set_to_none=False)
    assert all(torch.equal(p.grad, torch.zeros_like(p)) for p in params)
    opt.zero_grad()
    assert all(p.grad is None for p in params)


def test_pre_hook_may_replace_the_arguments_and_bad_results_raise():
    params = _params(11)
    opt = LeanAdam(params, lr=0.01, fused=True)
    seen = []

    def closure():
        seen.append("closure")
        return torch.tensor(1.0)

    # torch's convention: the hook sees and returns the step's arguments, the optimizer first.
    seen_args = []

    def replace_arguments(o, args, kwargs):
        seen_args.append(args)
        return (o,), {"closure": closure}

    opt.register_step_pre_hook(replace_arguments)
    sum(p.sum() for p in params).backward()
    assert float(opt.step()) == 1.0 and seen == ["closure"]
    assert seen_args == [(opt,)]
    bad = LeanAdam(_params(12), lr=0.01, fused=True)
    bad.register_step_pre_hook(lambda *a: "not a pair")
    with pytest.raises(RuntimeError, match="must return None or a tuple"):
        bad.step()
