import pytest
import torch
from ref_batch_norm import batch_norm_ref

from galfast.ops import batch_norm
from galfast.ops.batch_norm import (
    _BatchNormEager,
    launch_batch_norm,
    launch_batch_norm_backward,
    update_running_stats,
)

DTYPES = [torch.float32, torch.float64]
SHAPES = [(2, 1), (2, 20), (3, 3), (17, 20), (17, 130), (9746, 20), (1000, 64), (333, 130)]


def _tol(dtype, scale=1.0):
    return {"rtol": 1e-5, "atol": 2e-5 * scale} if dtype == torch.float32 else {}


def _inputs(n, c, dtype, seed=0, affine=True, shift=1.0):
    gen = torch.Generator().manual_seed(seed)
    x = (torch.randn(n, c, generator=gen, dtype=dtype) * 3 + shift).requires_grad_()
    w = (torch.rand(c, generator=gen, dtype=dtype) + 0.5).requires_grad_() if affine else None
    b = torch.randn(c, generator=gen, dtype=dtype).requires_grad_() if affine else None
    g = torch.randn(n, c, generator=gen, dtype=dtype)
    return x, w, b, g


def _grads(y, inputs, g):
    wanted = [t for t in inputs if t is not None]
    return torch.autograd.grad(y, wanted, g)


@pytest.mark.parametrize("n,c", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("affine", [True, False])
def test_matches_reference_and_torch(n, c, dtype, affine):
    x, w, b, g = _inputs(n, c, dtype, affine=affine)
    y, mean, var = batch_norm(x, w, b, return_stats=True)
    ref, ref_mean, ref_var = batch_norm_ref(x, w, b)
    torch.testing.assert_close(y.double(), ref.detach(), **_tol(dtype))
    assert mean.dtype == var.dtype == torch.float64
    torch.testing.assert_close(mean, ref_mean, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(var, ref_var, rtol=1e-12, atol=1e-12)
    expected = torch.nn.functional.batch_norm(x, None, None, w, b, training=True)
    torch.testing.assert_close(y, expected, **_tol(dtype))
    # Gradients: against the float64 reference (the truth) and against torch's own kernel.
    got = _grads(y, (x, w, b), g)
    want = _grads(ref, (x, w, b), g.double())
    torch_grads = _grads(expected, (x, w, b), g)
    for a, r, t in zip(got, want, torch_grads):
        assert a.dtype == dtype
        # grad_weight and grad_bias are sums over the n rows (torch's in float32).
        scale = 5 * n**0.5 if a.dim() == 1 else 1.0
        torch.testing.assert_close(a.double(), r.double(), **_tol(dtype, scale))
        torch.testing.assert_close(a, t, **_tol(dtype, scale))


@pytest.mark.parametrize("dtype", DTYPES)
def test_large_mean_keeps_the_variance(dtype):
    # Statistics in double, by chunks combined without a sum-of-squares cancellation: a channel
    # at 1e4 with unit spread keeps its variance.
    x, _, _, _ = _inputs(5000, 3, dtype, shift=1e4)
    _, mean, var = batch_norm(x.detach(), return_stats=True)
    _, ref_mean, ref_var = batch_norm_ref(x.detach())
    torch.testing.assert_close(mean, ref_mean, rtol=1e-13, atol=0)
    torch.testing.assert_close(var, ref_var, rtol=1e-9, atol=0)


def test_gradcheck_float64():
    x, w, b, _ = _inputs(7, 5, torch.float64)
    assert torch.autograd.gradcheck(lambda x, w, b: batch_norm(x, w, b), (x, w, b))
    assert torch.autograd.gradcheck(lambda x: batch_norm(x, eps=0.1), (x,))
    assert torch.autograd.gradcheck(lambda x, b: batch_norm(x, None, b), (x, b))


@pytest.mark.parametrize("n,c", [(9746, 20), (3001, 7), (517, 130)])
def test_results_are_bitwise_the_same_for_any_thread_count(n, c):
    x, w, b, g = _inputs(n, c, torch.float32, seed=3)
    before = torch.get_num_threads()
    results = []
    try:
        for threads in (1, 2, 3, 1):
            torch.set_num_threads(threads)
            y, mean, var = batch_norm(x, w, b, return_stats=True)
            results.append((y, mean, var, *_grads(y, (x, w, b), g)))
    finally:
        torch.set_num_threads(before)
    for other in results[1:]:
        for a, o in zip(results[0], other):
            assert torch.equal(a, o)


def test_non_contiguous_input_and_parameters():
    x, w, b, g = _inputs(40, 12, torch.float64)
    xt = x.detach().t().contiguous().t().requires_grad_()  # column-major [40, 12]
    w2 = torch.stack([w.detach(), w.detach()], 1).requires_grad_()  # w2[:, 0] is a strided view
    y = batch_norm(xt, w2[:, 0], b)
    ref, _, _ = batch_norm_ref(xt, w2[:, 0], b)
    torch.testing.assert_close(y, ref)
    got = torch.autograd.grad(y, (xt, w2), g)
    want = torch.autograd.grad(ref, (xt, w2), g)
    for a, r in zip(got, want):
        torch.testing.assert_close(a, r)


def test_only_the_wanted_gradients_flow():
    x, w, b, g = _inputs(30, 4, torch.float64)
    y = batch_norm(x.detach(), w, b.detach())
    (gw,) = torch.autograd.grad(y, (w,), g)
    ref, _, _ = batch_norm_ref(x.detach(), w, b.detach())
    torch.testing.assert_close(gw, torch.autograd.grad(ref, (w,), g)[0])
    # The stats are outputs, not differentiable: using them alone asks for no gradient.
    _, mean, var = batch_norm(x, w, b, return_stats=True)
    assert not mean.requires_grad and not var.requires_grad


def test_nan_and_inf_propagate_per_channel_like_torch():
    x = torch.randn(20, 3, dtype=torch.float64)
    x[4, 0] = float("nan")
    x[7, 1] = float("inf")
    y = batch_norm(x)
    expected = torch.nn.functional.batch_norm(x, None, None, training=True)
    torch.testing.assert_close(y, expected, equal_nan=True)
    assert torch.isnan(y[:, :2]).all() and torch.isfinite(y[:, 2]).all()


def test_no_channels():
    y = batch_norm(torch.randn(5, 0))
    assert y.shape == (5, 0)


@pytest.mark.parametrize(
    "args, match",
    [
        ((torch.randn(1, 4),), "Expected more than 1 value per channel when training"),
        ((torch.randn(0, 4),), "Expected more than 1 value per channel"),
        ((torch.randn(4),), r"shape \[num_rows, num_channels\]"),
        ((torch.randn(4, 3, 2),), r"shape \[num_rows, num_channels\]"),
        ((torch.randn(4, 3).half(),), "dtype float16"),
        ((torch.randint(0, 3, (4, 3)),), "dtype int64"),
        ((torch.randn(4, 3), torch.randn(2)), r"weight must have shape \[3\]"),
        ((torch.randn(4, 3), None, torch.randn(3, 1)), r"bias must have shape \[3\]"),
        ((torch.randn(4, 3), torch.randn(3, dtype=torch.float64)), "x's dtype"),
        ((torch.randn(4, 3), [1.0, 1.0, 1.0]), "weight must be a torch.Tensor"),
        (("x",), "x must be a torch.Tensor"),
        ((torch.randn(4, 3), None, None, -1.0), "eps must be"),
        ((torch.randn(4, 3), None, None, float("nan")), "eps must be"),
    ],
)
def test_bad_inputs_raise_value_errors(args, match):
    with pytest.raises(ValueError, match=match):
        batch_norm(*args)


def test_cuda_input_is_refused_with_a_pointer_to_torch():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    with pytest.raises(ValueError, match="CPU kernel only"):
        batch_norm(torch.randn(4, 3, device="cuda"))


def test_kernel_refuses_bad_params():
    from galfast._native import _C

    p = _C.BatchNormParams()
    p.num_rows, p.num_channels = -1, 3
    with pytest.raises(ValueError, match="negative size"):
        _C.batch_norm_cpu(p)
    p.num_rows = 4
    with pytest.raises(ValueError, match="not set"):
        _C.batch_norm_cpu(p)
    r = _C.BatchNormRunningParams()
    r.num_rows, r.num_channels, r.momentum = 1, 3, 0.1
    with pytest.raises(ValueError, match="more than 1 row"):
        _C.batch_norm_update_running_cpu(r)


def test_update_running_stats_matches_torch_formula():
    x, _, _, _ = _inputs(50, 6, torch.float32)
    _, mean, var = batch_norm(x.detach(), return_stats=True)
    rm, rv = torch.randn(6), torch.rand(6) + 0.5
    want_m = 0.7 * rm.double() + 0.3 * x.detach().double().mean(0)
    want_v = 0.7 * rv.double() + 0.3 * x.detach().double().var(0)
    update_running_stats(rm, rv, mean, var, 50, 0.3)
    torch.testing.assert_close(rm, want_m.float())
    torch.testing.assert_close(rv, want_v.float())
    with pytest.raises(ValueError, match="momentum"):
        update_running_stats(rm, rv, mean, var, 50, 1.5)
    with pytest.raises(ValueError, match="num_rows"):
        update_running_stats(rm, rv, mean, var, 1, 0.1)
    with pytest.raises(ValueError, match="running_var"):
        update_running_stats(rm, torch.ones(5), mean, var, 50, 0.1)


def test_opcheck():
    x, w, b, g = _inputs(12, 5, torch.float64)
    torch.library.opcheck(torch.ops.galfast.batch_norm.default, (x, w, b, 1e-5))
    torch.library.opcheck(torch.ops.galfast.batch_norm.default, (x, None, None, 1e-3))
    _, stats = launch_batch_norm(x.detach(), w.detach(), b.detach(), 1e-5)
    args = (g, x.detach(), stats, w.detach(), 1e-5, True)
    torch.library.opcheck(torch.ops.galfast.batch_norm_backward.default, args)
    rm, rv = torch.zeros(5, dtype=torch.float64), torch.ones(5, dtype=torch.float64)
    torch.library.opcheck(
        torch.ops.galfast.batch_norm_update_running.default, (stats, rm, rv, 12, 0.1)
    )


def test_eager_twin_and_custom_op_agree_bitwise():
    x, w, b, g = _inputs(300, 20, torch.float32)
    y_eager, s_eager = _BatchNormEager.apply(x, w, b, 1e-5)
    y_op, s_op = torch.ops.galfast.batch_norm(x, w, b, 1e-5)
    assert torch.equal(y_eager, y_op) and torch.equal(s_eager, s_op)
    for a, o in zip(_grads(y_eager, (x, w, b), g), _grads(y_op, (x, w, b), g)):
        assert torch.equal(a, o)
    grads = launch_batch_norm_backward(g, x.detach(), s_op, w.detach(), 1e-5, False)
    assert grads[0].numel() == 0  # grad_x skipped when not wanted
