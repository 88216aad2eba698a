"""SensitiveAttribute: validation with clear errors, and the known nodes it resolves to."""

import copy
import pickle
from math import nan

import numpy as np
import pytest
import torch

from galfast.gal.sensitive import as_attribute_list
from galfast.train import SensitiveAttribute


def test_all_nodes_known_by_default():
    attr = SensitiveAttribute("g", "binary", torch.tensor([1, 0, 1]))
    known = attr.known(3)
    assert known.nodes.tolist() == [0, 1, 2]
    assert known.targets.tolist() == [1, 0, 1]
    assert attr.num_outputs == 1


def test_mask_selects_known_nodes():
    values = torch.tensor([1, 7, 0, 7])  # rows 1 and 3 unknown: their values are ignored
    attr = SensitiveAttribute("g", "binary", values, mask=torch.tensor([True, False, True, False]))
    known = attr.known(4)
    assert known.nodes.tolist() == [0, 2]
    assert known.targets.tolist() == [1, 0]


def test_index_aligns_values_and_sorts():
    attr = SensitiveAttribute(
        "age", "categorical", torch.tensor([2, 0, 1]), index=torch.tensor([5, 1, 3])
    )
    known = attr.known(6)
    assert known.nodes.tolist() == [1, 3, 5]
    assert known.targets.tolist() == [0, 1, 2]
    assert attr.num_classes == 3 and attr.num_outputs == 3


def test_lookup_finds_known_positions():
    attr = SensitiveAttribute("g", "binary", torch.tensor([1, 0]), index=torch.tensor([2, 4]))
    known = attr.known(6)
    rows, targets = known.lookup(torch.tensor([4, 0, 2, 5]))
    assert rows.tolist() == [0, 2]
    assert targets.tolist() == [0, 1]


def test_multilabel_and_continuous_targets_are_2d_float():
    sets = SensitiveAttribute("types", "multilabel", torch.tensor([[1, 0, 1], [0, 0, 1]]))
    assert sets.known(2).targets.dtype == torch.get_default_dtype()
    assert sets.num_outputs == 3
    alpha = SensitiveAttribute("alpha", "continuous", torch.tensor([0.5, 1.5]))
    assert alpha.known(2).targets.shape == (2, 1)
    assert alpha.num_outputs == 1


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(name="", kind="binary", values=torch.tensor([0])), "name"),
        (dict(name="g", kind="ordinal", values=torch.tensor([0])), "kind"),
        (dict(name="g", kind="binary", values=[0, 1]), "torch.Tensor"),
        (dict(name="g", kind="binary", values=torch.tensor([0, 2])), "0 or 1"),
        (dict(name="g", kind="binary", values=torch.tensor([0.0, 1.0])), "integer"),
        (dict(name="g", kind="categorical", values=torch.tensor([0, -1])), ">= 0"),
        (
            dict(name="g", kind="categorical", values=torch.tensor([0, 4]), num_classes=3),
            "num_classes",
        ),
        (dict(name="g", kind="binary", values=torch.tensor([0, 1]), num_classes=2), "categorical"),
        # nan and 2.5 passed the comparison with the largest value; '3' was a raw TypeError.
        (
            dict(name="g", kind="categorical", values=torch.tensor([0, 1]), num_classes=nan),
            "num_classes must be an int, got nan",
        ),
        (
            dict(name="g", kind="categorical", values=torch.tensor([0, 1]), num_classes=2.5),
            "num_classes must be an int",
        ),
        (
            dict(name="g", kind="categorical", values=torch.tensor([0, 1]), num_classes="3"),
            "num_classes must be an int",
        ),
        (
            dict(name="g", kind="categorical", values=torch.tensor([0, 1]), num_classes=True),
            "num_classes must be an int",
        ),
        (
            dict(name="g", kind="categorical", values=torch.tensor([0, 0]), num_classes=1),
            "at least 2",
        ),
        (dict(name="g", kind="multilabel", values=torch.tensor([0, 1])), "matrix"),
        (dict(name="g", kind="multilabel", values=torch.tensor([[0, 3]])), "0 or 1"),
        (dict(name="g", kind="continuous", values=torch.tensor([1, 2])), "float"),
        (dict(name="g", kind="continuous", values=torch.tensor([1.0, float("nan")])), "NaN"),
        (
            dict(
                name="g",
                kind="binary",
                values=torch.tensor([0, 1]),
                mask=torch.tensor([True, False, True]),
            ),
            "mask has 3 entries",
        ),
        (
            dict(name="g", kind="binary", values=torch.tensor([0, 1]), mask=torch.tensor([1, 0])),
            "bool",
        ),
        (
            dict(name="g", kind="binary", values=torch.tensor([0, 1]), index=torch.tensor([0])),
            "index has 1 entries",
        ),
        (
            dict(name="g", kind="binary", values=torch.tensor([0, 1]), index=torch.tensor([1, 1])),
            "twice",
        ),
        (
            dict(name="g", kind="binary", values=torch.tensor([0, 1]), index=torch.tensor([0, -1])),
            "negative",
        ),
        (
            dict(
                name="g",
                kind="binary",
                values=torch.tensor([0, 1]),
                index=torch.tensor([0, 1]),
                mask=torch.tensor([True, True]),
            ),
            "either mask or index",
        ),
    ],
)
def test_bad_specs_raise_value_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SensitiveAttribute(**kwargs)


def test_known_checks_against_the_graph_size():
    with pytest.raises(ValueError, match="values has 3 rows but there are 4 nodes"):
        SensitiveAttribute("g", "binary", torch.tensor([0, 1, 1])).known(4)
    masked = SensitiveAttribute(
        "g", "binary", torch.tensor([0, 1, 1]), mask=torch.tensor([True, True, False])
    )
    with pytest.raises(ValueError, match="mask has 3 rows but there are 5 nodes"):
        masked.known(5)
    indexed = SensitiveAttribute("g", "binary", torch.tensor([0, 1]), index=torch.tensor([0, 9]))
    with pytest.raises(ValueError, match="node 9"):
        indexed.known(5)
    nowhere = SensitiveAttribute(
        "g", "binary", torch.tensor([0, 1]), mask=torch.tensor([False, False])
    )
    with pytest.raises(ValueError, match="known on no node"):
        nowhere.known(2)


def test_attribute_lists():
    a = SensitiveAttribute("a", "binary", torch.tensor([0, 1]))
    b = SensitiveAttribute("b", "binary", torch.tensor([1, 1]))
    assert as_attribute_list(a) == [a]
    assert as_attribute_list((a, b)) == [a, b]
    with pytest.raises(ValueError, match="unique"):
        as_attribute_list([a, a])
    with pytest.raises(ValueError, match="at least one"):
        as_attribute_list([])
    with pytest.raises(ValueError, match="SensitiveAttribute"):
        as_attribute_list([a, "b"])


def test_num_classes_takes_any_integer_type():
    values = torch.tensor([0, 2])
    for count in (3, np.int64(3), torch.tensor(3)):
        attr = SensitiveAttribute("g", "categorical", values, num_classes=count)
        assert attr.num_classes == 3 and type(attr.num_classes) is int


@pytest.mark.parametrize(
    "kind, field, edit",
    [
        ("binary", "values", 7),
        ("binary", "values", -1),
        ("categorical", "values", 9),  # beyond num_classes: a raw IndexError in the loss
        ("continuous", "values", nan),  # NaN metrics
        ("binary", "index", -5),
        ("binary", "mask", False),
    ],
)
def test_in_place_edits_after_construction_are_refused(kind, field, edit):
    values = torch.tensor([0.5, 1.5, 2.5]) if kind == "continuous" else torch.tensor([0, 1, 1])
    extra = dict(num_classes=3) if kind == "categorical" else {}
    if field == "index":
        extra["index"] = torch.tensor([0, 1, 2])
    if field == "mask":
        extra["mask"] = torch.tensor([True, True, True])
    attr = SensitiveAttribute("g", kind, values, **extra)
    attr.known(3)
    getattr(attr, field)[0] = edit
    with pytest.raises(ValueError, match=f"SensitiveAttribute 'g'.{field} was modified in place"):
        attr.known(3)


def test_copies_are_checked_afresh_and_inference_tensors_accepted():
    attr = SensitiveAttribute("g", "binary", torch.tensor([0, 1]))
    attr.values.add_(0)  # bumps the version: the original is refused from now on
    with pytest.raises(ValueError, match="modified in place"):
        attr.known(2)
    # A copy's tensors start new version counters: it is checked again instead.
    for copied in (pickle.loads(pickle.dumps(attr)), copy.deepcopy(attr)):
        assert copied.known(2).targets.tolist() == [0, 1]
    attr.values[0] = 7
    with pytest.raises(ValueError, match="0 or 1"):
        copy.deepcopy(attr)
    with torch.inference_mode():
        values = torch.tensor([1, 0])  # keeps no version counter
    assert SensitiveAttribute("g", "binary", values).known(2).targets.tolist() == [1, 0]
