"""galfast._dtypes.all_finite: the one-sum finiteness check equals torch.isfinite(t).all()."""

import pytest
import torch

from galfast import Graph
from galfast._dtypes import all_finite
from galfast.ops import aggregate


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf"), None])
@pytest.mark.parametrize("size", [0, 1, 7, 10_000])
def test_all_finite_equals_the_elementwise_test(dtype, bad, size):
    gen = torch.Generator().manual_seed(size)
    t = torch.randn(size, generator=gen).to(dtype)
    if bad is not None and size:
        t[torch.randint(size, (1,), generator=gen)] = bad
    assert all_finite(t) == bool(torch.isfinite(t).all())


def test_opposite_infinities_and_overflowing_sums():
    # +inf and -inf sum to NaN: still caught.
    assert not all_finite(torch.tensor([float("inf"), float("-inf"), 1.0]))
    # Finite values whose sum overflows: the exact test decides, so they pass.
    big = torch.full((4,), torch.finfo(torch.float32).max)
    assert all_finite(big) and all_finite(-big)
    assert all_finite(torch.full((3,), 60000.0, dtype=torch.float16))


def test_multidimensional_and_non_contiguous():
    t = torch.randn(6, 5).t()
    assert all_finite(t)
    t[2, 3] = float("nan")
    assert not all_finite(t)


def test_aggregate_still_refuses_non_finite_weights():
    g = Graph.from_edge_index(torch.tensor([[0, 1, 2], [1, 2, 0]]), 3)
    x = torch.randn(3, 4)
    for bad in (float("nan"), float("inf")):
        w = torch.ones(3)
        w[1] = bad
        with pytest.raises(ValueError, match="NaN or infinite"):
            aggregate(g, x, edge_weight=w)
    big = torch.full((3,), torch.finfo(torch.float32).max)
    assert torch.isfinite(aggregate(g, x.abs() * 0, edge_weight=big)).all()


def test_a_tensor_that_requires_grad_is_read_without_a_graph_or_warning():
    import warnings

    t = torch.randn(5, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert all_finite(t)


def test_a_scanned_tensor_is_read_again_only_after_an_in_place_change(monkeypatch):
    import galfast._dtypes as dtypes

    reads = []
    monkeypatch.setattr(dtypes, "all_finite", lambda t: reads.append(1) or all_finite(t))
    t = torch.rand(50)
    assert dtypes.finite_since_scanned(t) and dtypes.finite_since_scanned(t)
    assert len(reads) == 1
    t[3] = float("nan")  # moves the version counter
    assert not dtypes.finite_since_scanned(t) and len(reads) == 2
    assert not dtypes.finite_since_scanned(t) and len(reads) == 3  # never remembered as bad
    t[3] = 1.0
    assert dtypes.finite_since_scanned(t) and len(reads) == 4


def test_a_fitting_tensor_is_read_again_only_after_an_in_place_change(monkeypatch):
    # The range check reads the values on the host (a wait on a GPU): the same weights come
    # back every call, so a fit is remembered until the version counter moves.
    import galfast._dtypes as dtypes

    reads = []
    largest = dtypes.largest_magnitude
    monkeypatch.setattr(dtypes, "largest_magnitude", lambda t: reads.append(1) or largest(t))
    t = torch.rand(50, dtype=torch.float64)
    assert dtypes.fits_dtype(t, torch.float32) and dtypes.fits_dtype(t, torch.float32)
    assert len(reads) == 1
    t[3] = 1e300  # moves the counter: read again, and never remembered as fitting
    assert not dtypes.fits_dtype(t, torch.float32) and len(reads) == 2
    assert not dtypes.fits_dtype(t, torch.float32) and len(reads) == 3
    with torch.inference_mode():  # no counter: read every call
        u = torch.rand(3, dtype=torch.float64)
    assert dtypes.fits_dtype(u, torch.float32) and dtypes.fits_dtype(u, torch.float32)
    assert len(reads) == 5


def test_aggregate_sees_a_nan_written_into_weights_it_accepted_before():
    g = Graph.from_edge_index(torch.tensor([[0, 1, 2], [1, 2, 0]]), 3)
    w = torch.rand(3)
    x = torch.randn(3, 4)
    aggregate(g, x, w)
    w[1] = float("nan")
    with pytest.raises(ValueError, match="NaN or infinite"):
        aggregate(g, x, w)
