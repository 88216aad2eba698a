"""SensitiveAttribute: validation with clear errors, and the known nodes it resolves to."""

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
