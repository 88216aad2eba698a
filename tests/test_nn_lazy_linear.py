"""galfast's lazy linear map (the ``in_channels=-1`` layers' maps) on its own: sized by its
first input like PyG's ``Linear``, then a plain ``torch.nn.Linear`` forward without hooks."""

from __future__ import annotations

import copy
import io

import pytest
import torch

from galfast.nn._lazy_linear import LazyLinear


def test_first_call_sizes_it_and_leaves_no_hook():
    lin = LazyLinear(3, weight_initializer="glorot")
    assert lin.is_lazy and lin._forward_pre_hooks
    out = lin(torch.randn(5, 7))
    assert out.shape == (5, 3) and lin.weight.shape == (3, 7) and lin.in_features == 7
    assert not lin.is_lazy and not lin._forward_pre_hooks
    assert isinstance(lin, torch.nn.Linear)


def test_copies_and_pickles_stay_lazy_and_size_themselves():
    lin = LazyLinear(3)
    buffer = io.BytesIO()
    torch.save(lin, buffer)
    buffer.seek(0)
    for twin in (copy.deepcopy(lin.double()), torch.load(buffer, weights_only=False)):
        assert twin.is_lazy
        x = torch.randn(2, 4, dtype=twin.bias.dtype)
        assert twin(x).shape == (2, 3) and not twin._forward_pre_hooks
    assert lin.is_lazy and lin._forward_pre_hooks


def test_unknown_initializers_are_refused_by_name():
    with pytest.raises(ValueError, match="weight_initializer"):
        LazyLinear(3, weight_initializer="xavier")
    with pytest.raises(ValueError, match="bias_initializer"):
        LazyLinear(3, bias_initializer="ones")
