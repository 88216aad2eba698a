"""A layer given the wrong x or channel counts says which argument is wrong (a ValueError),
not a shape or dtype error from inside torch.nn.Linear."""

import pytest
import torch

from galfast.nn import ChebConv, GATConv, GCNConv, SAGEConv

EDGE_INDEX = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]])
LAYERS = {
    "gcn": lambda i, o: GCNConv(i, o),
    "sage": lambda i, o: SAGEConv(i, o),
    "cheb": lambda i, o: ChebConv(i, o, K=2),
    "gat": lambda i, o: GATConv(i, o, heads=2),
}


@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize(
    "x, message",
    [
        (torch.randn(4, 3).long(), "dtype torch.int64"),
        (torch.randn(4, 3).half(), "dtype torch.float16"),
        (torch.randn(4, 3).double(), "dtype torch.float64"),
        (torch.randn(4), r"\[num_nodes, 3\] tensor"),
        (torch.randn(4, 5), r"\[num_nodes, 3\] tensor"),
        (torch.randn(4, 3, 2), r"\[num_nodes, 3\] tensor"),
    ],
)
def test_wrong_x_names_x(layer, x, message):
    with pytest.raises(ValueError, match=message):
        LAYERS[layer](3, 2)(x, EDGE_INDEX)


@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize(
    "in_channels, out_channels, message",
    [(3, -1, "out_channels must be >= [01]"), (3.5, 2, "in_channels must be an int")],
)
def test_bad_channel_counts_are_refused(layer, in_channels, out_channels, message):
    with pytest.raises(ValueError, match=message):
        LAYERS[layer](in_channels, out_channels)


def test_gat_refuses_zero_out_channels():
    with pytest.raises(ValueError, match="out_channels must be >= 1"):
        GATConv(3, 0)


def test_layer_in_float64_still_runs():
    out = GCNConv(3, 2).double()(torch.randn(4, 3, dtype=torch.float64), EDGE_INDEX)
    assert out.dtype == torch.float64
