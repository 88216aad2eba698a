"""galfast.ops.bilinear_edge_scores (csrc/edge_scores) against its einsum reference
(tests/ref_edge_scores.py): scores and all three gradients on awkward batches, gradcheck,
thread-count independence, bad input, and EdgeHead's use of it."""

from __future__ import annotations

import pytest
import torch
from ref_edge_scores import bilinear_edge_scores_grads_ref, bilinear_edge_scores_ref

import galfast.ops
from galfast import ops
from galfast._native import _C
from galfast.models import BilinearRatingDecoder
from galfast.ops.edge_scores import _backward_op, _forward_op
from galfast.train import EdgeHead, rating_cross_entropy
from galfast.train.batches import RatingBatch

DTYPES = (torch.float32, torch.float64)
INDEX_DTYPES = (torch.int64, torch.int32)


def _params(dim, num_bases, num_levels, dtype, gen):
    return (
        torch.randn(num_bases, dim, dim, generator=gen, dtype=dtype),
        torch.randn(num_levels, num_bases, generator=gen, dtype=dtype),
    )


def _cases(dtype, index_dtype) -> dict:
    """name -> (z, src, dst, bases, coefficients)."""
    gen = torch.Generator().manual_seed(0)

    def case(num_nodes, dim, src, dst, num_bases=2, num_levels=5):
        z = torch.randn(num_nodes, dim, generator=gen, dtype=dtype)
        src, dst = torch.as_tensor(src).to(index_dtype), torch.as_tensor(dst).to(index_dtype)
        return (z, src, dst, *_params(dim, num_bases, num_levels, dtype, gen))

    def ids(n, high):
        return torch.randint(0, high, (n,), generator=gen)

    wide = 64 if dtype == torch.float32 else 32  # the kernels' largest dim
    return {
        "movielens_shape": case(300, 20, ids(1001, 120), 120 + ids(1001, 180)),
        "empty_batch": case(10, 20, ids(0, 10), ids(0, 10)),
        "one_edge": case(10, 20, [3], [7]),
        "repeated_ids": case(40, 7, ids(500, 5), ids(500, 5), num_bases=3, num_levels=4),
        "self_loops": case(30, 20, torch.arange(30), torch.arange(30)),
        "hub": case(50, 20, torch.full((3000,), 17), ids(3000, 50)),
        "first_and_last_ids": case(25, 20, [0, 24, 24, 0, 24], [24, 0, 24, 0, 0]),
        "one_node": case(1, 5, [0, 0, 0], [0, 0, 0]),
        "dim_one": case(20, 1, ids(77, 20), ids(77, 20), num_bases=1, num_levels=1),
        "dim_whole_vectors": case(60, 16, ids(300, 60), ids(300, 60)),
        "widest": case(60, wide, ids(300, 60), ids(300, 60)),
        "one_level_many_bases": case(60, 9, ids(133, 60), ids(133, 60), 5, 1),
        "wider_than_kernels": case(30, wide + 3, ids(40, 30), ids(40, 30)),
    }


def _tolerances(dtype):
    return (
        {"rtol": 1e-11, "atol": 1e-11} if dtype == torch.float64 else {"rtol": 2e-4, "atol": 2e-4}
    )


def _check_against_reference(z, src, dst, bases, coefficients):
    leaves = [t.clone().requires_grad_() for t in (z, bases, coefficients)]
    out = ops.bilinear_edge_scores(leaves[0], src, dst, leaves[1], leaves[2])
    grad = torch.randn(out.shape, dtype=z.dtype, generator=torch.Generator().manual_seed(1))
    out.backward(grad)
    tol = _tolerances(z.dtype)
    # The float32 reference in float64, so that only galfast's rounding is measured.
    as64 = [t.double() for t in (z, bases, coefficients)]
    expected = bilinear_edge_scores_ref(as64[0], src, dst, as64[1], as64[2])
    torch.testing.assert_close(out.double(), expected, **tol)
    grads = bilinear_edge_scores_grads_ref(grad.double(), as64[0], src, dst, as64[1], as64[2])
    for leaf, want in zip(leaves, grads):
        torch.testing.assert_close(leaf.grad.double(), want, **tol)


@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(_cases(torch.float32, torch.int64)))
def test_scores_and_gradients_match_the_reference(name, dtype, index_dtype):
    _check_against_reference(*_cases(dtype, index_dtype)[name])


def test_mixed_id_dtypes_and_non_contiguous_inputs():
    z, src, dst, bases, coefficients = _cases(torch.float64, torch.int64)["movielens_shape"]
    z_t = z.t().contiguous().t()  # the same values, column-major
    bases_t = bases.transpose(1, 2).contiguous().transpose(1, 2)
    src_strided = torch.stack([src, src], 1)[:, 0]
    assert not (z_t.is_contiguous() or bases_t.is_contiguous() or src_strided.is_contiguous())
    _check_against_reference(
        z_t, src_strided, dst.int(), bases_t, coefficients.t().contiguous().t()
    )


@pytest.mark.parametrize("name", ["movielens_shape", "hub", "empty_batch"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_results_are_bitwise_the_same_at_one_and_two_threads(name, dtype):
    z, src, dst, bases, coefficients = _cases(dtype, torch.int64)[name]
    if name == "hub":  # enough work for the kernels to go parallel
        src, dst = src.repeat(4), dst.repeat(4)
    grad = torch.randn(src.numel(), coefficients.size(0), dtype=dtype)
    results = []
    before = torch.get_num_threads()
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            leaves = [t.clone().requires_grad_() for t in (z, bases, coefficients)]
            out = ops.bilinear_edge_scores(leaves[0], src, dst, leaves[1], leaves[2])
            out.backward(grad)
            results.append([out.detach(), *(leaf.grad for leaf in leaves)])
    finally:
        torch.set_num_threads(before)
    for one, two in zip(*results):
        assert torch.equal(one, two)


def test_gradcheck_and_double_backward():
    gen = torch.Generator().manual_seed(5)
    z = torch.randn(7, 4, dtype=torch.float64, generator=gen, requires_grad=True)
    bases, coefficients = (t.requires_grad_() for t in _params(4, 2, 3, torch.float64, gen))
    src, dst = torch.tensor([0, 6, 3, 3, 2]), torch.tensor([6, 0, 3, 1, 2], dtype=torch.int32)

    def fn(z, bases, coefficients):
        return ops.bilinear_edge_scores(z, src, dst, bases, coefficients)

    assert torch.autograd.gradcheck(fn, (z, bases, coefficients))
    assert torch.autograd.gradgradcheck(fn, (z, bases, coefficients))


def test_gradients_only_for_the_inputs_that_need_them():
    z, src, dst, bases, coefficients = _cases(torch.float64, torch.int64)["repeated_ids"]
    z.requires_grad_()
    out = ops.bilinear_edge_scores(z, src, dst, bases, coefficients)
    out.sum().backward()
    assert bases.grad is None and coefficients.grad is None
    expected = bilinear_edge_scores_grads_ref(
        torch.ones_like(out), z, src, dst, bases, coefficients
    )
    torch.testing.assert_close(z.grad, expected[0], rtol=1e-11, atol=1e-11)


def test_no_grad_calls_give_the_same_scores():
    z, src, dst, bases, coefficients = _cases(torch.float32, torch.int64)["movielens_shape"]
    with torch.no_grad():
        plain = ops.bilinear_edge_scores(z, src, dst, bases, coefficients)
    tracked = ops.bilinear_edge_scores(z.requires_grad_(), src, dst, bases, coefficients)
    assert torch.equal(plain, tracked.detach())


def test_nan_in_z_reaches_the_scores_and_gradients_the_reference_has_it_in():
    z, src, dst, bases, coefficients = _cases(torch.float32, torch.int64)["movielens_shape"]
    z[int(src[5])] = float("nan")
    z.requires_grad_()
    out = ops.bilinear_edge_scores(z, src, dst, bases, coefficients)
    touched = (src == src[5]) | (dst == src[5])
    assert out[touched].isnan().all() and out[~touched].isfinite().all()
    out.backward(torch.ones_like(out))
    expected = bilinear_edge_scores_grads_ref(
        torch.ones_like(out), z, src, dst, bases, coefficients
    )
    assert z.grad[int(dst[5])].isnan().all()  # through v's gradient, bases^T u
    assert torch.equal(z.grad.isnan(), expected[0].isnan())


def test_out_of_range_and_negative_ids_raise_index_error():
    z, src, dst, bases, coefficients = _cases(torch.float32, torch.int64)["movielens_shape"]
    for bad in (z.size(0), -1):
        for which in ("src", "dst"):
            ids = {"src": src.clone(), "dst": dst.clone()}
            ids[which][700] = bad
            with pytest.raises(IndexError, match=rf"{which}\[700\] = {bad} is out of range"):
                ops.bilinear_edge_scores(z, ids["src"], ids["dst"], bases, coefficients)


def test_the_backward_kernel_checks_ids_too():
    from galfast.ops.edge_scores import _edge_scores, _edge_scores_backward

    z, src, dst, bases, coefficients = _cases(torch.float32, torch.int32)["movielens_shape"]
    _, projected = _edge_scores(z, src, dst, bases, coefficients)
    dst = dst.clone()
    dst[1000] = -5
    grad = torch.ones(src.numel(), coefficients.size(0))
    with pytest.raises(IndexError, match=r"dst\[1000\] = -5 is out of range"):
        _edge_scores_backward(grad, z, src, dst, bases, coefficients, projected)


def _bad_inputs():
    z = torch.randn(10, 4)
    src, dst = torch.tensor([1, 2]), torch.tensor([3, 4])
    bases, coefficients = torch.randn(2, 4, 4), torch.randn(5, 2)
    return {
        "z is not a tensor": ((z.tolist(), src, dst, bases, coefficients), "z must be a torch"),
        "float ids": ((z, src.float(), dst, bases, coefficients), "src must be a 1-D int32"),
        "2-D ids": ((z, src, dst.view(2, 1), bases, coefficients), "dst must be a 1-D int32"),
        "lengths differ": ((z, src, dst[:1], bases, coefficients), "same length"),
        "1-D z": ((z[0], src, dst, bases, coefficients), r"z must have shape \[N, D >= 1\]"),
        "bases not square": ((z, src, dst, bases[:, :3], coefficients), "bases must have shape"),
        "no bases": ((z, src, dst, bases[:0], coefficients[:, :0]), "bases must have shape"),
        "coefficients": ((z, src, dst, bases, coefficients.t()), "coefficients must have shape"),
        "dtypes differ": ((z, src, dst, bases.double(), coefficients), "share a dtype"),
        "integer z": ((z.long(), src, dst, bases, coefficients), "z has dtype int64"),
        "devices differ": ((z, src, dst, bases.to("meta"), coefficients), "bases is on meta"),
    }


@pytest.mark.parametrize("name", list(_bad_inputs()))
def test_bad_inputs_raise_value_error(name):
    args, message = _bad_inputs()[name]
    with pytest.raises(ValueError, match=message):
        ops.bilinear_edge_scores(*args)


def test_kernel_width_limit_is_the_documented_one():
    assert _C.edge_scores_max_dim(_C.DType.FLOAT32) == 64
    assert _C.edge_scores_max_dim(_C.DType.FLOAT64) == 32


def test_opcheck():
    z, src, dst, bases, coefficients = _cases(torch.float64, torch.int32)["repeated_ids"]
    args = (z.requires_grad_(), src, dst, bases.requires_grad_(), coefficients.requires_grad_())
    torch.library.opcheck(_forward_op, args)
    projected = _forward_op(*args)[1].detach()
    grad = torch.randn(src.numel(), coefficients.size(0), dtype=torch.float64)
    torch.library.opcheck(_backward_op, (grad, *(t.detach() for t in args), projected))


def _rating_batch(gen, num_edges=2000, users=60, nodes=150):
    return RatingBatch(
        torch.randint(0, users, (num_edges,), generator=gen),
        torch.randint(users, nodes, (num_edges,), generator=gen).int(),
        torch.randint(0, 5, (num_edges,), generator=gen),
        None,
    )


def test_edge_head_runs_the_fused_op_with_the_composition_loss_and_gradients(monkeypatch):
    gen = torch.Generator().manual_seed(4)
    z = torch.randn(150, 20, generator=gen, requires_grad=True)
    batch = _rating_batch(gen)
    torch.manual_seed(0)
    decoder = BilinearRatingDecoder(20)
    calls, real = [], galfast.ops.bilinear_edge_scores

    def counted(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(galfast.ops, "bilinear_edge_scores", counted)
    loss = rating_cross_entropy(EdgeHead(decoder)(z, batch), batch)
    assert len(calls) == 1 and calls[0][1] is batch.src and calls[0][2] is batch.dst
    params = (z, decoder.bases, decoder.coefficients)
    fused = torch.autograd.grad(loss, params)
    composed_loss = rating_cross_entropy(decoder(z[batch.src], z[batch.dst.long()]), batch)
    composed = torch.autograd.grad(composed_loss, params)
    torch.testing.assert_close(loss, composed_loss, rtol=1e-6, atol=1e-6)
    for got, want in zip(fused, composed):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)


def test_edge_head_takes_index_lists_through_the_decoder_forward():
    gen = torch.Generator().manual_seed(2)
    z = torch.randn(12, 6, generator=gen)
    decoder = BilinearRatingDecoder(6)
    out = EdgeHead(decoder)(z, RatingBatch([0, 3, 3], [5, 11, 0], None, None))
    torch.testing.assert_close(out, decoder(z[[0, 3, 3]], z[[5, 11, 0]]))


# ---------------------------------------------------------------- the edges-in-lanes kernel
LANES = _C.edge_scores_edges_in_lanes(_C.DType.FLOAT32, 20)
needs_lanes = pytest.mark.skipif(not LANES, reason="this CPU has no AVX-512F/DQ/VL")


def _run(z, src, dst, bases, coefficients, grad, simd: bool):
    """(scores, grad_z, grad_bases, grad_coefficients) with the edges-in-lanes kernel allowed or
    not."""
    before = _C.set_edge_scores_simd(simd)
    try:
        leaves = [t.clone().requires_grad_() for t in (z, bases, coefficients)]
        out = ops.bilinear_edge_scores(leaves[0], src, dst, leaves[1], leaves[2])
        out.backward(grad)
    finally:
        _C.set_edge_scores_simd(before)
    return [out.detach(), *(leaf.grad for leaf in leaves)]


def _lanes_case(num_edges, dim, num_bases, num_nodes=90, index_dtype=torch.int64, seed=0):
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(num_nodes, dim, generator=gen)
    src = torch.randint(0, num_nodes, (num_edges,), generator=gen).to(index_dtype)
    dst = torch.randint(0, num_nodes, (num_edges,), generator=gen).to(index_dtype)
    bases, coefficients = _params(dim, num_bases, 5, torch.float32, gen)
    grad = torch.randn(num_edges, 5, generator=gen)
    return z, src, dst, bases, coefficients, grad


@needs_lanes
@pytest.mark.parametrize("num_bases", [1, 2, 3])
@pytest.mark.parametrize("dim", [1, 3, 15, 16, 17, 20, 32, 64])
@pytest.mark.parametrize("num_edges", [1, 15, 16, 17, 530])
def test_lanes_kernel_matches_the_avx2_kernel_and_the_reference(num_edges, dim, num_bases):
    # Partial blocks (B not a multiple of 16, B < 16), more than one 512-edge chunk, every tile
    # width of the dim loops.
    _check_lanes_kernel(*_lanes_case(num_edges, dim, num_bases))


@needs_lanes
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
def test_lanes_kernel_on_repeated_ids_and_a_hub(index_dtype):
    gen = torch.Generator().manual_seed(3)
    z, _, _, bases, coefficients, grad = _lanes_case(1500, 20, 2, num_nodes=40)
    src = torch.full((1500,), 7).to(index_dtype)  # one hub source
    dst = torch.randint(0, 3, (1500,), generator=gen).to(index_dtype)  # three ids, repeated
    _check_lanes_kernel(z, src, dst, bases, coefficients, grad)


def _check_lanes_kernel(z, src, dst, bases, coefficients, grad):
    """The edges-in-lanes kernel's scores and gradients against the AVX2 kernel's and the
    reference's."""
    lanes = _run(z, src, dst, bases, coefficients, grad, simd=True)
    avx2 = _run(z, src, dst, bases, coefficients, grad, simd=False)
    for a, b in zip(lanes, avx2):
        torch.testing.assert_close(a, b, rtol=2e-4, atol=2e-4)
    _check_against_reference(z, src, dst, bases, coefficients)


@needs_lanes
def test_lanes_kernel_keeps_dead_lanes_out_of_the_parameter_gradients():
    # A 5-edge block fills 5 of 16 lanes; the dead ones read row 0, here NaN, which must not
    # reach grad_bases or grad_coefficients through them.
    z, src, dst, bases, coefficients, grad = _lanes_case(5, 20, 2)
    z[0] = float("nan")
    src, dst = src.clamp(min=1), dst.clamp(min=1)
    out, grad_z, grad_bases, grad_coefficients = _run(z, src, dst, bases, coefficients, grad, True)
    assert out.isfinite().all() and grad_bases.isfinite().all()
    assert grad_coefficients.isfinite().all() and grad_z[1:].isfinite().all()


@needs_lanes
def test_backward_follows_the_layout_its_forward_wrote():
    # The switch flips between the forward and the backward: the backward still reads the
    # projected rows in the layout the forward wrote them in.
    z, src, dst, bases, coefficients, grad = _lanes_case(100, 20, 2)
    expected = _run(z, src, dst, bases, coefficients, grad, simd=True)
    for first, second in ((True, False), (False, True)):
        before = _C.set_edge_scores_simd(first)
        try:
            leaves = [t.clone().requires_grad_() for t in (z, bases, coefficients)]
            out = ops.bilinear_edge_scores(leaves[0], src, dst, leaves[1], leaves[2])
            _C.set_edge_scores_simd(second)
            out.backward(grad)
        finally:
            _C.set_edge_scores_simd(before)
        for got, want in zip([leaf.grad for leaf in leaves], expected[1:]):
            torch.testing.assert_close(got, want, rtol=2e-4, atol=2e-4)


def test_switch_returns_its_previous_setting_and_picks_the_projected_layout():
    from galfast.ops.edge_scores import _edge_scores_outputs

    z, src, _, bases, coefficients, _ = _lanes_case(37, 20, 2)
    before = _C.set_edge_scores_simd(False)
    try:
        assert _C.set_edge_scores_simd(True) is False
        if LANES:
            assert _edge_scores_outputs(z, src, bases, coefficients)[1].shape == (3, 2, 20, 16)
        _C.set_edge_scores_simd(False)
        assert _edge_scores_outputs(z, src, bases, coefficients)[1].shape == (37, 2, 24)
    finally:
        _C.set_edge_scores_simd(before)
    # float64 never takes the lanes kernel.
    assert not _C.edge_scores_edges_in_lanes(_C.DType.FLOAT64, 20)
    assert not _C.edge_scores_edges_in_lanes(_C.DType.FLOAT32, 65)


@pytest.mark.parametrize("dtype", DTYPES)
def test_scores_are_a_view_of_level_major_storage(dtype):
    # rating_cross_entropy reads out.t(): contiguous, so ATen copies nothing.
    z, src, dst, bases, coefficients = _cases(dtype, torch.int64)["movielens_shape"]
    out = ops.bilinear_edge_scores(z.requires_grad_(), src, dst, bases, coefficients)
    assert out.shape == (src.numel(), coefficients.size(0)) and out.t().is_contiguous()
    with torch.no_grad():
        assert ops.bilinear_edge_scores(z, src, dst, bases, coefficients).t().is_contiguous()


@needs_lanes
def test_lanes_kernel_raises_on_bad_ids_in_a_partial_block():
    z, src, dst, bases, coefficients, _ = _lanes_case(21, 20, 2)
    for which, bad in (("src", 90), ("dst", -3)):
        ids = {"src": src.clone(), "dst": dst.int()}
        ids[which][19] = bad
        with pytest.raises(IndexError, match=rf"{which}\[19\] = {bad} is out of range"):
            ops.bilinear_edge_scores(z, ids["src"], ids["dst"], bases, coefficients)
