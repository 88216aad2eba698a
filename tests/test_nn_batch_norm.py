import copy

import pytest
import torch
from ref_batch_norm import running_stats_ref

import galfast.nn.batch_norm as batch_norm_module
from galfast.models import EmbeddingEncoder
from galfast.nn import BatchNorm


def _pair(c, **kwargs):
    """A galfast BatchNorm and a torch BatchNorm1d with the same (non-trivial) parameters."""
    torch.manual_seed(0)
    ours = BatchNorm(c, **kwargs)
    if ours.module.weight is not None:
        with torch.no_grad():
            ours.module.weight.uniform_(0.5, 1.5)
    if ours.module.bias is not None:
        with torch.no_grad():
            ours.module.bias.normal_()
    theirs = torch.nn.BatchNorm1d(c, **kwargs)
    theirs.load_state_dict(ours.module.state_dict())
    return ours, theirs


@pytest.fixture
def fused_calls(monkeypatch):
    """Counts the calls of the fused kernel from galfast.nn.BatchNorm."""
    calls = []
    fused = batch_norm_module.fused_batch_norm

    def counting(*args):
        calls.append(args[0].shape)
        return fused(*args)

    monkeypatch.setattr(batch_norm_module, "fused_batch_norm", counting)
    return calls


def test_holds_a_batchnorm1d_and_loads_its_state_dict():
    ours, theirs = _pair(7)
    assert isinstance(ours.module, torch.nn.BatchNorm1d)
    assert list(ours.state_dict()) == [f"module.{k}" for k in theirs.state_dict()]
    # A BatchNorm1d's (or galfast's earlier BatchNorm's) keys, without "module.", load too.
    restored = BatchNorm(7)
    restored.load_state_dict(theirs.state_dict())
    for k, v in theirs.state_dict().items():
        assert torch.equal(restored.state_dict()[f"module.{k}"], v)


@pytest.mark.parametrize("momentum", [0.1, None, 0.5])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_training_steps_match_batchnorm1d(momentum, dtype, fused_calls):
    ours, theirs = _pair(20, momentum=momentum, dtype=dtype)
    tol = {"rtol": 1e-5, "atol": 1e-4} if dtype == torch.float32 else {}
    gen = torch.Generator().manual_seed(1)
    batches = []
    for step in range(4):
        x = (torch.randn(300 + step, 20, generator=gen, dtype=dtype) * 2 + 3).requires_grad_()
        batches.append(x.detach())
        g = torch.randn(x.shape, generator=gen, dtype=dtype)
        y, y_ref = ours(x), theirs(x)
        torch.testing.assert_close(y, y_ref, **tol)
        params = (x, ours.module.weight, ours.module.bias)
        got = torch.autograd.grad(y, params, g)
        want = torch.autograd.grad(y_ref, (x, theirs.weight, theirs.bias), g)
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, **tol)
    assert len(fused_calls) == 4
    bn = ours.module
    assert int(bn.num_batches_tracked) == int(theirs.num_batches_tracked) == 4
    torch.testing.assert_close(bn.running_mean, theirs.running_mean, **tol)
    torch.testing.assert_close(bn.running_var, theirs.running_var, **tol)
    ref_mean, ref_var = running_stats_ref(torch.zeros(20), torch.ones(20), batches, momentum)
    torch.testing.assert_close(bn.running_mean.double(), ref_mean, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(bn.running_var.double(), ref_var, rtol=1e-6, atol=1e-6)


def test_eval_mode_uses_the_running_statistics_as_torch(fused_calls):
    ours, theirs = _pair(5)
    x = torch.randn(50, 5)
    ours(x), theirs(x)
    ours.eval(), theirs.eval()
    torch.testing.assert_close(ours(x), theirs(x))
    assert len(fused_calls) == 1  # the training step only


@pytest.mark.parametrize(
    "kwargs", [{"affine": False}, {"bias": False}, {"track_running_stats": False}]
)
def test_options_match_batchnorm1d(kwargs, fused_calls):
    ours, theirs = _pair(6, dtype=torch.float64, **kwargs)
    x = torch.randn(40, 6, dtype=torch.float64, requires_grad=True)
    for training in (True, False):
        ours.train(training), theirs.train(training)
        y, y_ref = ours(x), theirs(x)
        torch.testing.assert_close(y, y_ref)
        params = [x] + [p for p in ours.parameters()]
        params_ref = [x] + [p for p in theirs.parameters()]
        g = torch.ones_like(y)
        for a, b in zip(
            torch.autograd.grad(y, params, g), torch.autograd.grad(y_ref, params_ref, g)
        ):
            torch.testing.assert_close(a, b)
    # Without running statistics eval mode normalises by the batch too, on the fused kernel.
    assert len(fused_calls) == (2 if "track_running_stats" in kwargs else 1)
    assert ours.module.state_dict().keys() == theirs.state_dict().keys()
    for k, v in theirs.state_dict().items():
        torch.testing.assert_close(ours.module.state_dict()[k], v)


def test_other_inputs_fall_back_to_batchnorm1d(fused_calls):
    ours, theirs = _pair(4)
    x3 = torch.randn(6, 4, 5)
    torch.testing.assert_close(ours(x3), theirs(x3))
    half, half_ref = copy.deepcopy(ours).bfloat16(), copy.deepcopy(theirs).bfloat16()
    xh = torch.randn(8, 4).bfloat16()
    torch.testing.assert_close(half(xh), half_ref(xh))
    assert fused_calls == []
    # One row: torch's own error.
    with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
        ours(torch.randn(1, 4))
    with pytest.raises(ValueError, match="expected 2D or 3D input"):
        ours(torch.randn(4))


def test_embedding_encoder_uses_it_and_loads_old_checkpoints():
    enc = EmbeddingEncoder(30, 6)
    assert isinstance(enc.norm, BatchNorm)
    old = EmbeddingEncoder(30, 6)
    old.norm = torch.nn.BatchNorm1d(6)  # as the encoder was built before
    with torch.no_grad():
        old.norm.running_mean.normal_()
        old.norm.weight.uniform_(0.5, 1.5)
    enc.load_state_dict(old.state_dict())
    enc.eval(), old.eval()
    ids = torch.arange(30)
    torch.testing.assert_close(enc(ids, None), old(ids, None))


def test_torch_compile_matches_eager_and_updates_the_buffers():
    ours, theirs = _pair(6)
    compiled_module = copy.deepcopy(ours)
    x = torch.randn(40, 6, requires_grad=True)

    def f(module, x):
        return (module(x) * torch.arange(6.0)).tanh().sum()

    assert "Eager" in type(ours(x).grad_fn).__name__  # the fused op, not torch's kernel
    ours.load_state_dict(theirs.state_dict())  # undo that call's running-stats update
    compiled = torch.compile(f, backend="aot_eager")
    got = compiled(compiled_module, x)
    want = f(ours, x)
    torch.testing.assert_close(got, want)
    for a, b in zip(torch.autograd.grad(got, (x,)), torch.autograd.grad(want, (x,))):
        torch.testing.assert_close(a, b)
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        torch.testing.assert_close(
            getattr(compiled_module.module, name), getattr(ours.module, name)
        )
    f(theirs, x)  # torch's module takes the same step
    torch.testing.assert_close(ours.module.running_mean, theirs.running_mean)
    torch.testing.assert_close(ours.module.running_var, theirs.running_var)


def test_state_dict_is_pygs_and_loads_both_ways():
    pyg_nn = pytest.importorskip("torch_geometric.nn")
    ours, _ = _pair(5)
    theirs = pyg_nn.BatchNorm(5)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours(torch.randn(30, 5))  # moves the running statistics off their initial values
    theirs.load_state_dict(ours.state_dict())
    fresh = BatchNorm(5)
    fresh.load_state_dict(theirs.state_dict())
    x = torch.randn(12, 5)
    for mode in (True, False):
        for m in (ours, theirs, fresh):
            m.train(mode)
        want = theirs(x)
        torch.testing.assert_close(ours(x), want)
        torch.testing.assert_close(fresh(x), want)


def test_allow_single_element_matches_pyg():
    pyg_nn = pytest.importorskip("torch_geometric.nn")
    ours = BatchNorm(4, allow_single_element=True)
    ours.load_state_dict(_pair(4)[0].state_dict())  # non-trivial weight and bias
    theirs = pyg_nn.BatchNorm(4, allow_single_element=True)
    ours(torch.randn(20, 4))
    theirs.load_state_dict(ours.state_dict())
    one = torch.randn(1, 4)
    for mode in (True, False):
        ours.train(mode), theirs.train(mode)
        torch.testing.assert_close(ours(one), theirs(one))
    assert int(ours.module.num_batches_tracked) == 1  # a single row leaves the statistics
    with pytest.raises(ValueError, match="allow_single_element requires track_running_stats"):
        BatchNorm(4, track_running_stats=False, allow_single_element=True)
