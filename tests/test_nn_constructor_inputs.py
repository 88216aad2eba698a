"""The layers of galfast.nn take the arguments users really pass: NumPy integers and floats
(``labels.max() + 1``), 0-d tensors and 0/1 flags are accepted and stored as plain Python
values (the same layer as with Python's, output for output); a float count, a string flag, a
NaN rate or a non-callable network is a ValueError naming the argument, not a TypeError from
inside torch or a silently truncated value."""

import math

import numpy as np
import pytest
import torch

import galfast.nn as gnn
from galfast import Graph

N = 4
EDGE_INDEX = torch.tensor([[0, 1, 2, 3, 1], [1, 2, 3, 0, 3]])
EDGE_TYPE = torch.tensor([0, 1, 0, 1, 1])
INDEX = torch.tensor([0, 0, 1, 1])


def _randn(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(1))


X = _randn(N, 3)
EDGE_ATTR = _randn(EDGE_INDEX.size(1), 2)

# Each layer's arguments, built after seeding (its modules' weights come from the seed).
DEFAULTS = {
    "GCNConv": lambda: dict(in_channels=3, out_channels=2),
    "ChebConv": lambda: dict(in_channels=3, out_channels=2, K=2),
    "GATConv": lambda: dict(in_channels=3, out_channels=2, heads=2),
    "SAGEConv": lambda: dict(in_channels=3, out_channels=2),
    "GINConv": lambda: dict(nn=torch.nn.Linear(3, 2)),
    "NNConv": lambda: dict(in_channels=3, out_channels=2, nn=torch.nn.Linear(2, 6)),
    "CompGCNConv": lambda: dict(in_channels=3, out_channels=2, num_relations=2),
    "Set2Set": lambda: dict(in_channels=3, processing_steps=2),
    "BatchNorm": lambda: dict(in_channels=3),
    "GradReverse": lambda: dict(scale=1.0),
    "EdgeIndexAdapter": lambda: dict(module=torch.nn.Identity()),
}


@pytest.fixture(autouse=True)
def _global_rng_unchanged():
    """make() seeds torch's global generator: restored after each test, so the files after
    this one draw the weights they would draw without it."""
    with torch.random.fork_rng():
        yield


def make(name, **overrides):
    torch.manual_seed(0)
    return getattr(gnn, name)(**{**DEFAULTS[name](), **overrides})


def run(name, layer):
    """The layer's output on a 4-node graph (eval mode but for BatchNorm, whose training-mode
    output and running statistics are what eps and momentum change)."""
    layer.train(name == "BatchNorm")
    if name == "GATConv":
        x = (X, X) if isinstance(layer.in_channels, tuple) else X
        edge_attr = None if layer.edge_dim is None else EDGE_ATTR[:, : layer.edge_dim]
        return layer(x, EDGE_INDEX, edge_attr)
    if name == "NNConv":
        return layer(X, EDGE_INDEX, EDGE_ATTR)
    if name == "CompGCNConv":
        rel = _randn(2 * layer.num_relations, 3)
        out, rel_out = layer(X, EDGE_INDEX, EDGE_TYPE % layer.num_relations, rel)
        return torch.cat([out.flatten(), rel_out.flatten()])
    if name == "Set2Set":
        return layer(X, INDEX)
    if name == "BatchNorm":
        stats = [layer.module.running_mean, layer.module.running_var]
        return torch.cat([layer(X).flatten()] + [t for t in stats if t is not None])
    if name == "GradReverse":
        x = X.clone().requires_grad_()
        (layer(x) * X).sum().backward()
        return x.grad
    return layer(X, EDGE_INDEX)


def assert_same_layer(name, layer, reference):
    assert repr(layer) == repr(reference)
    torch.testing.assert_close(run(name, layer), run(name, reference), rtol=0, atol=0)


# --- integer arguments -------------------------------------------------------------------

INT_CASES = [
    ("GCNConv", "in_channels"),
    ("GCNConv", "out_channels"),
    ("ChebConv", "in_channels"),
    ("ChebConv", "K"),
    ("GATConv", "out_channels"),
    ("GATConv", "heads"),
    ("GATConv", "edge_dim"),
    ("SAGEConv", "in_channels"),
    ("SAGEConv", "out_channels"),
    ("NNConv", "in_channels"),
    ("NNConv", "out_channels"),
    ("CompGCNConv", "in_channels"),
    ("CompGCNConv", "num_relations"),
    ("Set2Set", "in_channels"),
    ("Set2Set", "processing_steps"),
    ("BatchNorm", "in_channels"),
]
INT_VALUES = {"edge_dim": 2}  # the others keep their default
INT_FORMS = {
    "np.int64": np.int64,
    "np.int32": np.int32,
    "np.uint8": np.uint8,
    "0-d tensor": torch.tensor,
}


def _int_value(name, arg):
    return INT_VALUES.get(arg, DEFAULTS[name]().get(arg))


def _stored(layer, arg):
    if arg == "K":  # ChebConv holds K linear maps
        return len(layer.lins)
    return getattr(layer, arg)


@pytest.mark.parametrize("form", INT_FORMS)
@pytest.mark.parametrize("name, arg", INT_CASES)
def test_integer_of_any_type_is_stored_as_a_python_int(name, arg, form):
    value = _int_value(name, arg)
    layer = make(name, **{arg: INT_FORMS[form](value)})
    stored = _stored(layer, arg)
    assert type(stored) is int and stored == value
    assert_same_layer(name, layer, make(name, **{arg: value}))


def test_numpy_channel_counts_as_pyg_users_pass_them():
    labels = np.array([0, 2, 1, 2])
    conv = gnn.GCNConv(np.int64(3), labels.max() + 1)
    assert (type(conv.in_channels), type(conv.out_channels)) == (int, int)
    assert repr(conv) == "GCNConv(3, 3)"
    assert run("GCNConv", conv).shape == (N, 3)


@pytest.mark.parametrize("name", ["GATConv", "SAGEConv"])
def test_bipartite_channel_pair_of_numpy_ints_is_a_tuple_of_python_ints(name):
    layer = make(name, in_channels=(np.int64(3), torch.tensor(3)))
    assert layer.in_channels == (3, 3) and type(layer.in_channels) is tuple
    assert all(type(c) is int for c in layer.in_channels)
    reference = make(name, in_channels=(3, 3))
    assert repr(layer) == repr(reference)
    out, expected = layer((X, X), EDGE_INDEX), reference((X, X), EDGE_INDEX)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


BAD_INTS = {
    "2.5": 2.5,
    "2.0": 2.0,
    "str": "2",
    "bool": True,
    "None": None,
    "np.float64": np.float64(2.0),
    "np.bool_": np.True_,
    "float tensor": torch.tensor(2.0),
    "1-d tensor": torch.tensor([2]),
}


@pytest.mark.parametrize(
    "name, arg, bad",
    # edge_dim=None means no edge features
    [(n, a, b) for n, a in INT_CASES for b in BAD_INTS if (a, b) != ("edge_dim", "None")],
)
def test_non_integer_count_is_refused_by_name(name, arg, bad):
    with pytest.raises(ValueError, match=rf"^{arg} must be an int, got"):
        make(name, **{arg: BAD_INTS[bad]})


@pytest.mark.parametrize("form", [int, np.int64])
@pytest.mark.parametrize(
    "name, arg, value, message",
    [
        ("ChebConv", "K", 0, "K must be >= 1, got 0"),
        ("GATConv", "heads", 0, "heads must be >= 1, got 0"),
        ("GATConv", "edge_dim", 0, r"edge_dim must be None, -1 \(lazy\) or >= 1, got 0"),
        ("GATConv", "edge_dim", -2, "edge_dim must be >= -1, got -2"),
        ("GATConv", "out_channels", 0, "out_channels must be >= 1, got 0"),
        ("GCNConv", "in_channels", -2, "in_channels must be >= -1, got -2"),
        ("NNConv", "in_channels", -1, "in_channels must be >= 0, got -1"),
        ("CompGCNConv", "num_relations", -1, "num_relations must be >= 0, got -1"),
        ("Set2Set", "in_channels", 0, "in_channels must be >= 1, got 0"),
        ("Set2Set", "processing_steps", -1, "processing_steps must be >= 0, got -1"),
        ("BatchNorm", "in_channels", -1, "in_channels must be >= 0, got -1"),
    ],
)
def test_count_below_its_minimum_is_refused_by_name(name, arg, value, message, form):
    with pytest.raises(ValueError, match=f"^{message}$"):
        make(name, **{arg: form(value)})


@pytest.mark.parametrize("name", ["GATConv", "SAGEConv"])
def test_channel_pair_with_a_float_names_the_side(name):
    with pytest.raises(ValueError, match=r"^in_channels \(destination\) must be an int, got"):
        make(name, in_channels=(3, 2.5))


# --- float arguments ---------------------------------------------------------------------

FLOAT_CASES = {
    "GATConv.negative_slope": ("GATConv", "negative_slope", {}, lambda m: m.negative_slope),
    "GATConv.dropout": ("GATConv", "dropout", {}, lambda m: m.dropout),
    "GATConv.fill_value": ("GATConv", "fill_value", {"edge_dim": 2}, lambda m: m.fill_value),
    "GINConv.eps": ("GINConv", "eps", {}, lambda m: m.initial_eps),
    "CompGCNConv.dropout": ("CompGCNConv", "dropout", {}, lambda m: m.drop.p),
    "BatchNorm.eps": ("BatchNorm", "eps", {}, lambda m: m.module.eps),
    "BatchNorm.momentum": ("BatchNorm", "momentum", {}, lambda m: m.module.momentum),
    "GradReverse.scale": ("GradReverse", "scale", {}, lambda m: m.scale),
}
# Each form with a value it holds exactly (an integer form an integral one).
FLOAT_FORMS = {
    "np.float64": (np.float64, 0.25),
    "np.float32": (np.float32, 0.25),
    "0-d tensor": (torch.tensor, 0.25),
    "python int": (int, 1),
    "np.int64": (np.int64, 1),
}


@pytest.mark.parametrize("form", FLOAT_FORMS)
@pytest.mark.parametrize("case", FLOAT_CASES)
def test_real_number_of_any_type_is_stored_as_a_python_float(case, form):
    name, arg, extra, stored = FLOAT_CASES[case]
    convert, value = FLOAT_FORMS[form]
    layer = make(name, **extra, **{arg: convert(value)})
    assert type(stored(layer)) is float and stored(layer) == value
    assert_same_layer(name, layer, make(name, **extra, **{arg: float(value)}))


BAD_FLOATS = {
    "str": "0.5",
    "None": None,
    "bool": True,
    "np.bool_": np.True_,
    "nan": math.nan,
    "inf": math.inf,
    "list": [0.5],
    "1-d tensor": torch.tensor([0.5]),
}


def _meaningful(arg: str, bad: str) -> bool:
    """momentum=None and fill_value=None have a meaning (as in torch / PyG), and a tensor
    fill_value holds the loops' edge features."""
    return (bad == "None" and arg in ("momentum", "fill_value")) or (
        bad == "1-d tensor" and arg == "fill_value"
    )


@pytest.mark.parametrize(
    "case, bad",
    [(c, b) for c in FLOAT_CASES for b in BAD_FLOATS if not _meaningful(FLOAT_CASES[c][1], b)],
)
def test_non_finite_or_non_numeric_float_is_refused_by_name(case, bad):
    name, arg, extra, _ = FLOAT_CASES[case]
    reduction = arg == "fill_value" and bad == "str"  # a string names a reduction there
    message = "must be a number, a tensor or one of" if reduction else "must be a finite number"
    with pytest.raises(ValueError, match=rf"^{arg} {message}"):
        make(name, **extra, **{arg: BAD_FLOATS[bad]})


@pytest.mark.parametrize(
    "name, arg, value, message",
    [
        ("GATConv", "dropout", 1.5, r"dropout must lie in \[0.0, 1.0\], got 1.5"),
        ("GATConv", "dropout", -0.1, r"dropout must lie in \[0.0, 1.0\], got -0.1"),
        ("CompGCNConv", "dropout", 1.5, r"dropout must lie in \[0.0, 1.0\], got 1.5"),
        ("BatchNorm", "momentum", 1.5, r"momentum must lie in \[0.0, 1.0\], got 1.5"),
        ("BatchNorm", "eps", -1e-5, "eps must be >= 0.0, got -1e-05"),
        ("GradReverse", "scale", -1.0, r"scale must be >= 0 \(the sign is already reversed\)"),
    ],
)
def test_float_out_of_range_is_refused_by_name(name, arg, value, message):
    with pytest.raises(ValueError, match=f"^{message}"):
        make(name, **{arg: np.float64(value)})


def test_grad_reverse_function_checks_its_scale():
    x = X.clone().requires_grad_()
    with pytest.raises(ValueError, match="^scale must be a finite number"):
        gnn.grad_reverse(x, "1")
    with pytest.raises(ValueError, match="^scale must be a finite number"):
        gnn.grad_reverse(x, math.nan)
    gnn.grad_reverse(x, np.float32(0.5)).sum().backward()
    assert torch.equal(x.grad, torch.full_like(X, -0.5))


# --- flags -------------------------------------------------------------------------------

FLAG_CASES = [
    ("GCNConv", "improved"),
    ("GCNConv", "cached"),
    ("GCNConv", "add_self_loops"),
    ("GCNConv", "normalize"),
    ("GCNConv", "bias"),
    ("ChebConv", "bias"),
    ("GATConv", "concat"),
    ("GATConv", "add_self_loops"),
    ("GATConv", "bias"),
    ("GATConv", "residual"),
    ("SAGEConv", "normalize"),
    ("SAGEConv", "root_weight"),
    ("SAGEConv", "project"),
    ("SAGEConv", "bias"),
    ("GINConv", "train_eps"),
    ("NNConv", "root_weight"),
    ("NNConv", "bias"),
    ("CompGCNConv", "bias"),
    ("CompGCNConv", "batch_norm"),
    ("BatchNorm", "affine"),
    ("BatchNorm", "track_running_stats"),
    ("BatchNorm", "allow_single_element"),
]
BAD_FLAGS = {
    "one": 1,  # a flag is True or False, as galfast's ops take them
    "str": "False",
    "count": 2,  # e.g. GCNConv(16, 32, 2): a count in the flag's position
    "np count": np.int64(2),
    "float": 0.5,
    "None": None,
    "list": [True],
}


@pytest.mark.parametrize(
    "name, arg, bad",
    # GCNConv's add_self_loops=None follows normalize
    [
        (n, a, b)
        for n, a in FLAG_CASES
        for b in BAD_FLAGS
        if (n, a, b) != ("GCNConv", "add_self_loops", "None")
    ],
)
def test_non_boolean_flag_is_refused_by_name(name, arg, bad):
    with pytest.raises(ValueError, match=f"^{arg} must be a bool, got"):
        make(name, **{arg: BAD_FLAGS[bad]})


def test_misplaced_positional_count_is_not_read_as_a_flag():
    with pytest.raises(ValueError, match="^improved must be a bool, got int 2"):
        gnn.GCNConv(16, 32, 2)


# Where a layer keeps a flag it stores (bias, batch_norm and train_eps only decide whether a
# parameter or module exists, as in PyG; the outputs compare those).
STORED_FLAGS = {
    "affine": lambda m: m.module.affine,
    "track_running_stats": lambda m: m.module.track_running_stats,
    "bias": None,
    "batch_norm": None,
    "train_eps": None,
}


FLAG_FORMS = {"bool": bool, "np.bool_": np.bool_}


@pytest.mark.parametrize("value", [False, True])
@pytest.mark.parametrize("form", FLAG_FORMS)
@pytest.mark.parametrize("name, arg", FLAG_CASES)
def test_boolean_flag_of_any_type_is_the_same_layer(name, arg, form, value):
    layer = make(name, **{arg: FLAG_FORMS[form](value)})
    stored = STORED_FLAGS.get(arg, lambda m: getattr(m, arg))
    if stored is not None:
        assert type(stored(layer)) is bool and stored(layer) == value
    assert_same_layer(name, layer, make(name, **{arg: value}))


# --- options chosen by name, networks, callables -----------------------------------------


@pytest.mark.parametrize(
    "name, arg, value, extra",
    [
        ("ChebConv", "normalization", "both", {}),
        ("ChebConv", "normalization", True, {}),
        ("ChebConv", "normalization", 1, {}),
        ("NNConv", "aggr", "min", {}),
        ("NNConv", "aggr", None, {}),
        ("CompGCNConv", "composition", "add", {}),
        ("CompGCNConv", "composition", None, {}),
        ("SAGEConv", "aggr", 3, {}),
        ("SAGEConv", "aggr", np.int64(2), {}),
        ("SAGEConv", "aggr", None, {}),
        ("SAGEConv", "aggr", 2.5, {}),
        ("SAGEConv", "aggr", [1, 2], {}),
        ("SAGEConv", "aggr", [], {}),
        ("SAGEConv", "aggr", "nope", {}),
        ("SAGEConv", "aggr", torch.nn.Linear(2, 2), {}),
        ("GATConv", "fill_value", "median", {"edge_dim": 2}),
        ("GATConv", "fill_value", [1.0, 2.0], {"edge_dim": 2}),
        ("GATConv", "fill_value", torch.ones(3), {"edge_dim": 2}),
        ("GINConv", "nn", 8, {}),
        ("GINConv", "nn", np.int64(8), {}),
        ("GINConv", "nn", None, {}),
        ("GINConv", "nn", "mlp", {}),
        ("NNConv", "nn", None, {}),
        ("NNConv", "nn", "mlp", {}),
        ("CompGCNConv", "act", "tanh", {}),
        ("CompGCNConv", "act", 1, {}),
        ("EdgeIndexAdapter", "module", None, {}),
        ("EdgeIndexAdapter", "module", "gcn", {}),
    ],
)
# SAGEConv's other aggregations import PyG, whose first import meets torch.jit's warning.
@pytest.mark.filterwarnings("ignore::DeprecationWarning:torch.*")
def test_bad_option_is_refused_by_name(name, arg, value, extra):
    with pytest.raises(ValueError, match=rf"^{arg}\b"):
        make(name, **extra, **{arg: value})


def test_nnconv_takes_pygs_sum_alias_of_add():
    out = run("NNConv", make("NNConv", aggr="sum"))
    torch.testing.assert_close(out, run("NNConv", make("NNConv", aggr="add")), rtol=0, atol=0)


@pytest.mark.parametrize(
    "fill_value, same_as",
    [(None, 1.0), (torch.tensor([0.5]), 0.5), (torch.tensor([0.5, 0.5]), 0.5)],
    ids=["None", "one value", "one per feature"],
)
def test_gat_fill_values_pyg_takes(fill_value, same_as):
    layer = make("GATConv", edge_dim=2, fill_value=fill_value)
    expected = run("GATConv", make("GATConv", edge_dim=2, fill_value=same_as))
    torch.testing.assert_close(run("GATConv", layer), expected)


def test_gin_takes_any_callable_as_pyg():
    linear = torch.nn.Linear(3, 2)
    layer = gnn.GINConv(lambda h: linear(h) * 2)
    expected = gnn.GINConv(linear)(X, EDGE_INDEX) * 2
    torch.testing.assert_close(layer(X, EDGE_INDEX), expected)


def test_nnconv_takes_any_callable_as_pyg():
    linear = torch.nn.Linear(2, 6)
    fused = gnn.NNConv(3, 2, linear, root_weight=False)  # resets linear
    materialised = gnn.NNConv(3, 2, lambda e: linear(e), root_weight=False)
    expected = fused(X, EDGE_INDEX, EDGE_ATTR)
    torch.testing.assert_close(materialised(X, EDGE_INDEX, EDGE_ATTR), expected)


def test_choice_given_as_a_numpy_string_is_stored_as_str():
    layer = make("ChebConv", normalization=np.str_("rw"))
    assert type(layer.normalization) is str
    assert_same_layer("ChebConv", layer, make("ChebConv", normalization="rw"))


# --- non-tensor forward arguments --------------------------------------------------------

SIZED = {
    "GATConv": lambda m, size: m(X, EDGE_INDEX, size=size),
    "SAGEConv": lambda m, size: m(X, EDGE_INDEX, size=size),
    "GINConv": lambda m, size: m(X, EDGE_INDEX, size=size),
    "NNConv": lambda m, size: m(X, EDGE_INDEX, EDGE_ATTR, size=size),
}


@pytest.mark.parametrize(
    "size, message",
    [
        ((4.5, 4), r"^size \(num_src\) must be an int, got float"),
        ((4, True), r"^size \(num_dst\) must be an int, got bool"),
        ((4, "4"), r"^size \(num_dst\) must be an int, got str"),
    ],
)
@pytest.mark.parametrize("name", SIZED)
def test_size_with_a_non_integer_count_is_refused(name, size, message):
    with pytest.raises(ValueError, match=message):
        SIZED[name](make(name).eval(), size)


@pytest.mark.parametrize("name", SIZED)
def test_size_of_numpy_ints_is_the_same_as_python_ints(name):
    layer = make(name).eval()
    expected = SIZED[name](layer, (N, N))
    out = SIZED[name](layer, (np.int64(N), torch.tensor(N)))
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


@pytest.mark.parametrize("dim_size", [2.5, 2.0, "2", True])
def test_set2set_dim_size_must_be_an_integer(dim_size):
    with pytest.raises(ValueError, match="^dim_size must be an int, got"):
        make("Set2Set")(X, INDEX, dim_size=dim_size)


def test_set2set_numpy_dim_size_is_the_same():
    layer = make("Set2Set")
    out = layer(X, INDEX, dim_size=np.int64(3))
    torch.testing.assert_close(out, layer(X, INDEX, dim_size=3), rtol=0, atol=0)


@pytest.mark.parametrize(
    "lambda_max, message",
    [
        ("2", "^lambda_max must be a finite number"),
        (math.nan, "^lambda_max must be a finite number"),
        (True, "^lambda_max must be a finite number"),
        (0.0, "^lambda_max must be > 0, got 0.0"),
        (-1, "^lambda_max must be > 0, got -1.0"),
    ],
)
def test_cheb_lambda_max_must_be_a_positive_number(lambda_max, message):
    with pytest.raises(ValueError, match=message):
        make("ChebConv")(X, EDGE_INDEX, lambda_max=lambda_max)


def test_cheb_numpy_lambda_max_is_the_same():
    layer = make("ChebConv")
    out = layer(X, EDGE_INDEX, lambda_max=np.float32(3.0))
    torch.testing.assert_close(out, layer(X, EDGE_INDEX, lambda_max=3.0), rtol=0, atol=0)


@pytest.mark.parametrize("num_layers", [2.5, "2", True, -1])
def test_layer_graphs_checks_num_layers(num_layers):
    graph = Graph.from_edge_index(EDGE_INDEX, N)
    with pytest.raises(ValueError, match="^num_layers must be"):
        gnn.layer_graphs(graph, num_layers)


def test_layer_graphs_takes_a_numpy_count():
    graph = Graph.from_edge_index(EDGE_INDEX, N)
    assert gnn.layer_graphs(graph, np.int64(2)) == [graph, graph]
