"""galfast's layers and models under the PyTorch machinery users combine them with:
torch.compile with fullgraph=True, torch.export, and CPU autocast (bfloat16), against eager
galfast and PyG."""

from __future__ import annotations

import copy

import pytest
import torch

import galfast.models as gm
import galfast.nn as gnn
from galfast.graph import Graph
from galfast.ops import aggregate

pyg_nn = pytest.importorskip("torch_geometric.nn")

NUM_NODES = 20


def _graph(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, NUM_NODES, (2, 60), generator=gen)
    x = torch.randn(NUM_NODES, 8, generator=gen)
    return x, edge_index


def _fullgraph(module: torch.nn.Module) -> torch.nn.Module:
    torch._dynamo.reset()
    # aot_eager traces as inductor would (same graph breaks, the backward traced too, through
    # the custom ops' fake kernels) without generating code.
    return torch.compile(copy.deepcopy(module), fullgraph=True, backend="aot_eager")


# ---------------------------------------------------------------- every layer and model
# A few nodes each: compiling is slow, and what is checked (one graph, equal numbers) does
# not depend on the size.
SMALL = 8


def _small_inputs():
    gen = torch.Generator().manual_seed(1)
    edge_index = torch.randint(0, SMALL, (2, 20), generator=gen)
    return {
        "x": torch.randn(SMALL, 4, generator=gen),
        "edge_index": edge_index,
        "edge_attr": torch.randn(20, 3, generator=gen),
        "edge_type": torch.randint(0, 2, (20,), generator=gen),
        "rel": torch.randn(4, 4, generator=gen),
        "batch": torch.tensor([0, 0, 0, 0, 1, 1, 1, 1]),
        "graph": Graph.from_edge_index(edge_index, num_nodes=SMALL),
    }


class _WithGraph(torch.nn.Module):
    """``module(*args, graph)`` with the Graph held: torch.export takes tensors only."""

    def __init__(self, module: torch.nn.Module, graph: Graph) -> None:
        super().__init__()
        self.module, self.graph = module, graph

    def forward(self, *args):
        return self.module(*args, self.graph)


class _EdgeScores(torch.nn.Module):
    def __init__(self, decoder: gm.BilinearRatingDecoder) -> None:
        super().__init__()
        self.decoder = decoder

    def forward(self, z, src, dst):
        return self.decoder.edge_scores(z, src, dst)


def _kg_predictor(d):
    triples = torch.stack([d["edge_index"][0], d["edge_type"], d["edge_index"][1]], 1)
    encoder = gm.CompGCNEncoder(
        SMALL, 2, triples, dim=4, init_dim=4, hidden_dim=4, conv_dropout=0.0, hidden_dropout=0.0
    )
    return gm.KGLinkPredictor(encoder, gm.DistMultDecoder(SMALL, 4))


def _conve():
    return gm.ConvEDecoder(
        SMALL, 4, k_w=2, k_h=2, num_filters=2, kernel_size=2, feature_dropout=0, hidden_dropout=0
    )


# name -> inputs -> (module, args, kwargs). Graph arguments are held (_WithGraph), so that
# every case exports; the layers' edge_index path is the one torch.export can take.
MODULES = {
    "GCNConv": lambda d: (gnn.GCNConv(4, 5), (d["x"], d["edge_index"]), {}),
    "SAGEConv": lambda d: (gnn.SAGEConv(4, 5), (d["x"], d["edge_index"]), {}),
    "GINConv": lambda d: (gnn.GINConv(torch.nn.Linear(4, 5)), (d["x"], d["edge_index"]), {}),
    "GATConv": lambda d: (gnn.GATConv(4, 5, heads=2), (d["x"], d["edge_index"]), {}),
    "ChebConv": lambda d: (gnn.ChebConv(4, 5, K=3), (d["x"], d["edge_index"]), {}),
    "NNConv": lambda d: (
        gnn.NNConv(4, 5, torch.nn.Linear(3, 20)),
        (d["x"], d["edge_index"], d["edge_attr"]),
        {},
    ),
    "CompGCNConv": lambda d: (
        gnn.CompGCNConv(4, 5, num_relations=2, dropout=0.0),
        (d["x"], d["edge_index"], d["edge_type"], d["rel"]),
        {},
    ),
    "BatchNorm": lambda d: (gnn.BatchNorm(4), (d["x"],), {}),
    "GradReverse": lambda d: (gnn.GradReverse(0.5), (d["x"],), {}),
    "EdgeIndexAdapter": lambda d: (
        _WithGraph(gnn.EdgeIndexAdapter(pyg_nn.GCNConv(4, 5)), d["graph"]),
        (d["x"],),
        {},
    ),
    "AttackerMLP": lambda d: (gm.AttackerMLP(4, hidden=(6,)), (d["x"],), {}),
    "BilinearRatingDecoder": lambda d: (
        gm.BilinearRatingDecoder(4, 3),
        (d["x"][:5], d["x"][3:]),
        {},
    ),
    "BilinearRatingDecoder.edge_scores": lambda d: (
        _EdgeScores(gm.BilinearRatingDecoder(4, 3)),
        (d["x"], d["edge_index"][0], d["edge_index"][1]),
        {},
    ),
    "DotProductLinkDecoder": lambda d: (gm.DotProductLinkDecoder(), (d["x"][:5], d["x"][3:]), {}),
    "EmbeddingEncoder": lambda d: (
        _WithGraph(gm.EmbeddingEncoder(SMALL, 4, convs=[gnn.GCNConv(4, 4)]), d["graph"]),
        (torch.arange(SMALL),),
        {},
    ),
    "DistMultDecoder": lambda d: (
        gm.DistMultDecoder(SMALL, 4),
        (d["x"][:3], d["x"][3:6], d["x"]),
        {},
    ),
    "ConvEDecoder": lambda d: (_conve(), (d["x"][:3], d["x"][3:6], d["x"]), {}),
    # CompGCNEncoder.embed and a 1-N decoder, the id checks traced too.
    "KGLinkPredictor": lambda d: (
        _kg_predictor(d),
        (torch.tensor([0, 7]), torch.tensor([0, 3])),
        {},
    ),
}
# torch.compile refuses torch.nn.LSTM and GRU modules (see docs/pyg_compat.md): these export only.
EXPORT_ONLY = {
    "MPNN": lambda d: (
        gm.MPNN(4, 3, dim=6, message_steps=2, processing_steps=2, edge_hidden=5),
        (d["x"], d["edge_index"], d["edge_attr"], d["batch"]),
        {"num_graphs": 2},
    ),
}


def _outputs(out) -> list[torch.Tensor]:
    return (
        [out] if isinstance(out, torch.Tensor) else [t for t in out if isinstance(t, torch.Tensor)]
    )


def _run(module: torch.nn.Module, args: tuple, kwargs: dict):
    """The outputs, and the gradients of a weighted sum of them (each output its own weight)
    with respect to the float inputs and the parameters."""
    args = tuple(a.detach().clone().requires_grad_() if a.is_floating_point() else a for a in args)
    outputs = _outputs(module(*args, **kwargs))
    loss = sum((o * (i + 1)).sum() for i, o in enumerate(outputs))
    wrt = [a for a in args if a.requires_grad] + list(module.parameters())
    grads = torch.autograd.grad(loss, wrt, allow_unused=True)
    return [o.detach() for o in outputs], [g for g in grads if g is not None]


def _case(make):
    torch.manual_seed(0)
    module, args, kwargs = make(_small_inputs())
    return copy.deepcopy(module), module, args, kwargs


# Dynamo instantiates an autograd.Function it traces (GradReverse's, the decoder's row dots)
# and torch warns about that instance itself.
TORCH_FUNCTION_WARNING = "ignore:.*should not be instantiated:DeprecationWarning"


@pytest.mark.filterwarnings(TORCH_FUNCTION_WARNING)
@pytest.mark.parametrize("name", MODULES)
def test_module_compiles_fullgraph_forward_and_backward_as_eager(name):
    pristine, module, args, kwargs = _case(MODULES[name])
    expected_out, expected_grads = _run(module, args, kwargs)
    compiled = _fullgraph(pristine)
    # Twice: the first call's trace may leave caches behind (on a Graph, on the module) that the
    # second reads; one the trace left on CompGCNEncoder broke its second call.
    for _ in range(2):
        out, grads = _run(compiled, args, kwargs)
        torch.testing.assert_close(out, expected_out)
        assert len(grads) == len(expected_grads) > 0
        torch.testing.assert_close(grads, expected_grads)


# As for Set2Set below: torch's GRU and LSTM assign their _flat_weights under export.
@pytest.mark.filterwarnings(r"ignore:The tensor attributes self\..*_flat_weights:UserWarning")
@pytest.mark.parametrize("name", [*MODULES, *EXPORT_ONLY])
def test_module_exports_as_eager(name):
    pristine, module, args, kwargs = _case({**MODULES, **EXPORT_ONLY}[name])
    expected = _outputs(module(*args, **kwargs))
    exported = torch.export.export(pristine, args, kwargs)
    torch.testing.assert_close(_outputs(exported.module()(*args, **kwargs)), expected)


@pytest.mark.filterwarnings(TORCH_FUNCTION_WARNING)
def test_bilinear_rating_decoder_compiles_fullgraph_with_one_side_constant():
    # Only one side needing a gradient took the backward's out= write into a strided slice.
    torch.manual_seed(0)
    decoder = gm.BilinearRatingDecoder(4, 3)
    z_src, z_dst = torch.randn(5, 4), torch.randn(5, 4)
    compiled = _fullgraph(decoder)
    for module in (decoder, compiled):
        z = z_src.clone().requires_grad_()
        module(z, z_dst).sum().backward()
        if module is decoder:
            expected = z.grad, decoder.bases.grad
    torch.testing.assert_close((z.grad, compiled.bases.grad), expected)


def test_exported_compgcnconv_runs_other_graphs_of_the_same_size():
    # The relation order is built in the program from the values, not specialised to them.
    torch.manual_seed(0)
    x, edge_index = _graph()
    x, rel = x[:, :4], torch.randn(4, 4)
    conv = gnn.CompGCNConv(4, 6, num_relations=2, dropout=0.0).eval()
    edge_type = torch.zeros(edge_index.size(1), dtype=torch.long)
    exported = torch.export.export(copy.deepcopy(conv), (x, edge_index, edge_type, rel))
    _, other_index = _graph(seed=1)
    other_type = torch.randint(0, 2, (edge_index.size(1),))
    for inputs in ((x, edge_index, edge_type, rel), (x, other_index, other_type, rel)):
        torch.testing.assert_close(exported.module()(*inputs), conv(*inputs))


def test_compiled_kg_link_predictor_still_checks_ids():
    pristine, _, (entity, relation), _ = _case(MODULES["KGLinkPredictor"])
    compiled = _fullgraph(pristine)
    compiled(entity, relation)
    with pytest.raises(RuntimeError, match="relation holds an id outside"):
        compiled(entity, torch.tensor([0, 4]))


# torch's own LSTM warns that export assigns its _flat_weights (PyG's Set2Set warns alike).
@pytest.mark.filterwarnings("ignore:The tensor attributes self.lstm:UserWarning")
def test_set2set_exports_with_dim_size():
    torch.manual_seed(0)
    x = torch.randn(10, 4)
    index = torch.tensor([0, 0, 0, 1, 1, 1, 1, 2, 2, 2])
    readout = gnn.Set2Set(4, processing_steps=3)
    reference = pyg_nn.aggr.Set2Set(4, 3)
    readout.load_state_dict(reference.state_dict())
    exported = torch.export.export(copy.deepcopy(readout), (x, index), {"dim_size": 3})
    out = exported.module()(x, index, dim_size=3)
    torch.testing.assert_close(out, reference(x, index, dim_size=3))


def test_compgcnconv_compiles_fullgraph_and_still_checks_edge_types():
    torch.manual_seed(0)
    x, edge_index = _graph()
    x = x[:, :4]
    edge_type = torch.randint(0, 2, (edge_index.size(1),))
    rel = torch.randn(4, 4)
    conv = gnn.CompGCNConv(4, 6, num_relations=2, dropout=0.0)
    expected = conv(x, edge_index, edge_type, rel)
    compiled = _fullgraph(conv)
    out = compiled(x, edge_index, edge_type, rel)
    torch.testing.assert_close(out[0], expected[0])
    torch.testing.assert_close(out[1], expected[1])
    # A relation id in [R, 2R) names an inverse relation: refused under compile as eagerly.
    bad = edge_type.clone()
    bad[3] = 3
    with pytest.raises(RuntimeError, match="edge_type must lie in"):
        compiled(x, edge_index, bad, rel)


@pytest.mark.parametrize(
    "name, channels, bf16_input",
    [
        ("gcn", (8, 8), False),  # lin first: a bfloat16 [N, 8] reaches the aggregation
        ("gcn", (8, 4), True),
        ("sage", (8, 4), False),
        ("sage", (8, 8), True),
        ("gin", (8, 8), True),
        ("cheb", (8, 8), True),
    ],
)
def test_layers_run_under_cpu_bfloat16_autocast_as_pyg(name, channels, bf16_input):
    torch.manual_seed(0)
    x, edge_index = _graph()
    f_in, f_out = channels
    pairs = {
        "gcn": lambda: (gnn.GCNConv(f_in, f_out), pyg_nn.GCNConv(f_in, f_out)),
        "sage": lambda: (gnn.SAGEConv(f_in, f_out), pyg_nn.SAGEConv(f_in, f_out)),
        "gin": lambda: (
            gnn.GINConv(torch.nn.Linear(f_in, f_out)),
            pyg_nn.GINConv(torch.nn.Linear(f_in, f_out)),
        ),
        "cheb": lambda: (gnn.ChebConv(f_in, f_out, K=2), pyg_nn.ChebConv(f_in, f_out, K=2)),
    }
    ours, reference = pairs[name]()
    ours.load_state_dict(reference.state_dict())
    if bf16_input:
        x = x.bfloat16()
    x_ours, x_ref = x.clone().requires_grad_(), x.clone().requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = ours(x_ours, edge_index)
        expected = reference(x_ref, edge_index)
    torch.testing.assert_close(out.float(), expected.float(), atol=0.05, rtol=0.05)
    assert out.dtype == expected.dtype  # SAGE's was float32 where PyG's is bfloat16
    out.float().sum().backward()
    expected.float().sum().backward()
    assert x_ours.grad.dtype == x.dtype
    torch.testing.assert_close(x_ours.grad.float(), x_ref.grad.float(), atol=0.05, rtol=0.05)


def test_embedding_encoder_names_an_edge_index_passed_as_its_graph():
    _, edge_index = _graph()
    encoder = gm.EmbeddingEncoder(NUM_NODES, 8, convs=[gnn.GCNConv(8, 8)])
    ids = torch.arange(NUM_NODES)
    with pytest.raises(TypeError, match="graph must be a galfast.Graph"):
        encoder(ids, edge_index)
    graph = Graph.from_edge_index(edge_index, num_nodes=NUM_NODES)
    assert encoder(ids, graph).shape == (NUM_NODES, 8)


@pytest.mark.filterwarnings(TORCH_FUNCTION_WARNING)
@pytest.mark.parametrize("train", [True, False])
def test_float_attributes_compile_fullgraph_with_dynamic_shapes(train):
    # Under dynamic=True the float attributes (negative_slope, dropout, GradReverse's scale)
    # are symbolic: their checks (math.isfinite) could not be traced.
    torch._dynamo.reset()
    torch.manual_seed(0)
    x, edge_index = torch.randn(10, 8), torch.randint(0, 10, (2, 30))
    conv = gnn.GATConv(8, 4, heads=2).train(train)
    compiled = torch.compile(conv, backend="aot_eager", fullgraph=True, dynamic=True)
    torch.testing.assert_close(compiled(x, edge_index), conv(x, edge_index))
    reverse = torch.compile(gnn.GradReverse(0.5), backend="aot_eager", fullgraph=True, dynamic=True)
    t = torch.randn(3, requires_grad=True)
    reverse(t).sum().backward()
    assert t.grad.tolist() == [-0.5, -0.5, -0.5]


def test_caches_built_while_tracing_are_checked_from_the_first_eager_read():
    # The trace's version counts were recorded: the next eager backward on the same graph was
    # refused as "derived csc was modified in place", though nothing was edited.
    torch._dynamo.reset()
    graph = Graph.from_edge_index(torch.randint(0, 20, (2, 60)), 20)
    x = torch.randn(20, 4, requires_grad=True)
    compiled = torch.compile(lambda t: aggregate(graph, t, reduce="mean"), backend="aot_eager")
    compiled(x).sum().backward()
    aggregate(graph, x, reduce="mean").sum().backward()
    graph.csc.row.add_(0)  # an edit from here on is still seen
    with pytest.raises(ValueError, match="derived .* was modified in place"):
        aggregate(graph, x, reduce="mean").sum().backward()


@pytest.mark.filterwarnings(TORCH_FUNCTION_WARNING)
@pytest.mark.parametrize("scale, message", [(float("nan"), "finite"), (True, "bool")])
def test_number_checks_hold_while_tracing(scale, message):
    # Every number passed unchecked while compiling: a NaN scale reversed gradients into NaN.
    torch._dynamo.reset()
    compiled = torch.compile(lambda t: gnn.grad_reverse(t, scale), backend="aot_eager")
    with pytest.raises(ValueError, match=message):
        compiled(torch.randn(3, requires_grad=True))
