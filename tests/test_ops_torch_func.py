"""torch.func through galfast's ops and layers: per-sample gradients (vmap of grad), vjp,
Jacobians and Hessians (jacrev of jacrev) give plain PyTorch's numbers; forward mode, which
the kernels lack, raises an error naming the op. Their eager autograd.Functions once made
every transform fail with torch's "must override the setup_context staticmethod"."""

from __future__ import annotations

import pytest
import torch
from ref_aggregate import aggregate_ref
from ref_batch_norm import batch_norm_ref
from ref_compgcn import compgcn_aggregate_ref
from ref_edge_scores import bilinear_edge_scores_ref
from ref_gat_aggregate import gat_aggregate_reference
from ref_nnconv import nnconv_aggregate_ref
from ref_row_dots import row_dot_grads_ref
from torch.func import functional_call, grad, jacfwd, jacrev, jvp, vjp, vmap

import galfast
from galfast import Graph
from galfast.models.bilinear_forms import bilinear_forms
from galfast.ops import (
    aggregate,
    batch_norm,
    bilinear_edge_scores,
    compgcn_aggregate,
    gat_aggregate,
    gather_rows,
    nnconv_aggregate,
    row_dot_grads,
)

EDGES = torch.tensor([[0, 1, 2, 0, 3, 2, 4], [1, 2, 0, 2, 2, 2, 0]])  # self loop, node 4 no in
NUM_NODES = 6  # node 5 isolated
BATCH = 3

pyg_nn = pytest.importorskip("torch_geometric.nn")


def _graph(**kwargs) -> Graph:
    return Graph.from_edge_index(EDGES, num_nodes=NUM_NODES, **kwargs)


def _randn(*shape, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dtype=torch.float64, generator=gen)


def _assert_transforms_match(fused, reference, weight, x, batch):
    """grad, vmap(grad) (per-sample gradients), vjp, jacrev and jacrev(jacrev) (the Hessian)
    of ``loss(weight, x) = sum(tanh(f(x @ weight))**2)`` agree for both f."""

    def loss(f):
        return lambda weight, x: f(x @ weight).tanh().square().sum()

    per_sample = lambda fn: vmap(grad(fn), in_dims=(None, 0))  # noqa: E731
    hessian = lambda fn: jacrev(jacrev(fn))  # noqa: E731
    for transform, inputs in (
        (grad, (weight, x)),
        (per_sample, (weight, batch)),
        (jacrev, (weight, x)),
        (hessian, (weight, x)),
    ):
        got = transform(loss(fused))(*inputs)
        torch.testing.assert_close(got, transform(loss(reference))(*inputs))
    cotangent = _randn(*fused(x @ weight).shape, seed=9)
    _, fused_vjp = vjp(lambda w: fused(x @ w), weight)
    _, reference_vjp = vjp(lambda w: reference(x @ w), weight)
    torch.testing.assert_close(fused_vjp(cotangent), reference_vjp(cotangent))


@pytest.mark.parametrize(
    ("reduce", "norm"), [("sum", None), ("sum", "gcn"), ("mean", None), ("max", None)]
)
def test_aggregate_transforms_match_torch(reduce, norm):
    graph = _graph()

    def fused(h):
        return aggregate(graph, h, reduce=reduce, norm=norm)

    def reference(h):
        return aggregate_ref(NUM_NODES, graph.col, graph.row, h, reduce=reduce, norm=norm)

    weight, x = _randn(3, 4, seed=1), _randn(NUM_NODES, 3, seed=2)
    batch = _randn(BATCH, NUM_NODES, 3, seed=3)
    _assert_transforms_match(fused, reference, weight, x, batch)


def test_aggregate_vjp_of_returned_transform_is_not_zero():
    # torch.func.vjp's backward runs after its transform returned: the saved x is a dead
    # wrapper, whose composition once recorded nothing and gave a zero gradient.
    graph, x = _graph(), _randn(NUM_NODES, 3)
    cotangent = _randn(NUM_NODES, 3, seed=1)
    _, pullback = vjp(lambda h: aggregate(graph, h), x)
    (got,) = pullback(cotangent)
    want = aggregate_ref(NUM_NODES, graph.row, graph.col, cotangent)  # the transpose
    torch.testing.assert_close(got, want)


def test_aggregate_vmap_over_any_batch_dim_and_the_weights():
    graph = _graph()
    xs, weights = _randn(NUM_NODES, BATCH, 3), _randn(BATCH, graph.num_edges, seed=1).abs()
    got = vmap(lambda x: aggregate(graph, x, reduce="max"), in_dims=1)(xs)
    for b in range(BATCH):
        torch.testing.assert_close(got[b], aggregate(graph, xs[:, b], reduce="max"))
    x = xs[:, 0]
    got = vmap(lambda w: aggregate(graph, x, w))(weights)
    for b in range(BATCH):
        want = aggregate_ref(NUM_NODES, graph.col, graph.row, x, weights[b])
        torch.testing.assert_close(got[b], want)


def test_vmapped_output_backward_runs_the_kernels_per_sample():
    # Plain autograd through a vmap: the backward (grad mode off) runs the kernel ops, vmapped.
    graph = _graph()
    xs = _randn(NUM_NODES, BATCH, 3).requires_grad_()
    out = vmap(lambda x: aggregate(graph, x, norm="gcn"), in_dims=1)(xs)
    (got,) = torch.autograd.grad(out.square().sum(), xs)
    leaf = xs.detach().requires_grad_()
    want_out = aggregate_ref(NUM_NODES, graph.col, graph.row, leaf.flatten(1), norm="gcn")
    (want,) = torch.autograd.grad(want_out.square().sum(), leaf)
    torch.testing.assert_close(got, want)


def _gcn_loss(conv_class):
    """A two-layer GCN's squared error on one sample, as a function of its parameters."""
    torch.manual_seed(0)
    model = torch.nn.ModuleDict({"one": conv_class(3, 8), "two": conv_class(8, 2)}).double()

    def loss(params, x, target):
        one = {k[4:]: v for k, v in params.items() if k.startswith("one.")}
        two = {k[4:]: v for k, v in params.items() if k.startswith("two.")}
        hidden = functional_call(model["one"], one, (x, EDGES)).relu()
        return (functional_call(model["two"], two, (hidden, EDGES)) - target).square().mean()

    return loss, {k: v.detach() for k, v in model.named_parameters()}


def test_gcn_per_sample_gradients_match_pyg():
    # The demanding user's case (DP-SGD): per-sample gradients of a two-layer GCN, galfast's
    # layers against PyG's plain-torch ones with the same parameters.
    fused, params = _gcn_loss(galfast.nn.GCNConv)
    reference, _ = _gcn_loss(pyg_nn.GCNConv)
    xs, targets = _randn(BATCH, NUM_NODES, 3), _randn(BATCH, NUM_NODES, 2, seed=1)
    got = vmap(grad(fused), in_dims=(None, 0, 0))(params, xs, targets)
    want = vmap(grad(reference), in_dims=(None, 0, 0))(params, xs, targets)
    for name in want:
        torch.testing.assert_close(got[name], want[name])


@pytest.mark.parametrize(
    "make",
    [
        lambda lib: lib.GCNConv(3, 2),
        lambda lib: lib.GCNConv(3, 2, improved=True, add_self_loops=False),
        lambda lib: lib.ChebConv(3, 2, K=3),
    ],
    ids=["gcn", "gcn-improved", "cheb"],
)
def test_layers_vmap_over_edge_weights_as_pyg(make):
    # The negative-degree check branched on values (vmap refused it) and ChebConv added the
    # weight-batched terms in place into an unbatched one.
    edge_index = torch.tensor([[0, 1, 2, 3, 4], [1, 2, 0, 0, 3]])
    x = _randn(5, 3, seed=2)
    weights = torch.rand(BATCH, 5, generator=torch.Generator().manual_seed(3)).double()
    ours, theirs = make(galfast.nn).double(), make(pyg_nn).double()
    theirs.load_state_dict(ours.state_dict())
    got = vmap(lambda w: ours(x, edge_index, w))(weights)
    want = torch.stack([theirs(x, edge_index, w) for w in weights])
    torch.testing.assert_close(got, want)


def test_gat_aggregate_transforms_match_torch():
    graph, heads = _graph(), 2
    att = _randn(heads, 2, seed=4)

    def parts(h):
        h = h.view(NUM_NODES, heads, 2)
        return h, (h * att).sum(-1), (h * att.flip(1)).sum(-1)

    def fused(h):
        return gat_aggregate(graph, *parts(h)).flatten(1)

    def reference(h):
        return gat_aggregate_reference(graph, *parts(h)).flatten(1)

    weight, x = _randn(3, 4, seed=1), _randn(NUM_NODES, 3, seed=2)
    _assert_transforms_match(fused, reference, weight, x, _randn(BATCH, NUM_NODES, 3, seed=3))


@pytest.mark.parametrize("composition", ["sub", "mult", "corr"])
def test_compgcn_aggregate_transforms_match_torch(composition):
    edge_type = torch.tensor([0, 1, 0, 1, 1, 0, 1])
    graph, rel = _graph(edge_type=edge_type), _randn(2, 4, seed=4)

    def fused(h):
        return compgcn_aggregate(graph, h, rel, composition=composition, norm="gcn")

    def reference(h):
        return compgcn_aggregate_ref(
            NUM_NODES, EDGES[0], EDGES[1], edge_type, h, rel, composition, norm="gcn"
        )

    weight, x = _randn(3, 4, seed=1), _randn(NUM_NODES, 3, seed=2)
    _assert_transforms_match(fused, reference, weight, x, _randn(BATCH, NUM_NODES, 3, seed=3))


def test_nnconv_aggregate_transforms_match_torch():
    graph = _graph()
    hidden, lin = _randn(graph.num_edges, 2, seed=4), _randn(4 * 2, 2, seed=5)

    def fused(h):
        return nnconv_aggregate(graph, h, hidden, lin, reduce="mean")

    def reference(h):
        return nnconv_aggregate_ref(NUM_NODES, graph.col, graph.row, h, hidden, lin, reduce="mean")

    weight, x = _randn(3, 4, seed=1), _randn(NUM_NODES, 3, seed=2)
    _assert_transforms_match(fused, reference, weight, x, _randn(BATCH, NUM_NODES, 3, seed=3))


def test_batch_norm_transforms_match_torch():
    scale = _randn(4, seed=4)

    def fused(h):
        return batch_norm(h, scale)

    def reference(h):
        return batch_norm_ref(h, scale)[0]

    weight, x = _randn(3, 4, seed=1), _randn(NUM_NODES, 3, seed=2)
    _assert_transforms_match(fused, reference, weight, x, _randn(BATCH, NUM_NODES, 3, seed=3))


def test_row_ops_transforms_match_torch():
    # gather_rows, bilinear_edge_scores and the rating decoder's row dots (bilinear_forms).
    index = torch.tensor([5, 0, 2, 2, 1, 0])
    src, dst = torch.tensor([0, 1, 5, 3]), torch.tensor([2, 2, 4, 0])
    bases, mix = _randn(2, 4, 4, seed=4), _randn(3, 2, seed=5)

    def fused(h):
        picked = gather_rows(h, index)
        scores = bilinear_edge_scores(h, src, dst, bases, mix)
        return torch.cat([picked, bilinear_forms(h[:4], bases, h[2:]).repeat(1, 2)]), scores

    def reference(h):
        picked = h.index_select(0, index)
        scores = bilinear_edge_scores_ref(h, src, dst, bases, mix)
        dots = torch.einsum("bd,sde,be->bs", h[:4], bases, h[2:])
        return torch.cat([picked, dots.repeat(1, 2)]), scores

    def joined(f):
        return lambda h: torch.cat([part.flatten() for part in f(h)])[:NUM_NODES].unsqueeze(1)

    weight, x = _randn(3, 4, seed=1), _randn(NUM_NODES, 3, seed=2)
    batch = _randn(BATCH, NUM_NODES, 3, seed=3)
    _assert_transforms_match(joined(fused), joined(reference), weight, x, batch)


def test_row_dot_grads_vmaps():
    # float32: the reference's roundings are the kernel's for float32.
    vectors, z = _randn(BATCH, 4, 2, 3).float(), _randn(BATCH, 4, 3, seed=1).float()
    grads = _randn(BATCH, 4, 2, seed=2).float()
    got = vmap(row_dot_grads)(vectors, z, grads)
    for b in range(BATCH):
        for part, want in zip(got, row_dot_grads_ref(vectors[b], z[b], grads[b])):
            torch.testing.assert_close(part[b], want)


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
@pytest.mark.parametrize("transform", [jvp, jacfwd])
def test_forward_mode_names_the_op_and_reverse_mode(transform):
    graph, x = _graph(), _randn(NUM_NODES, 3)

    def f(h):
        return aggregate(graph, h, norm="gcn")

    run = (lambda: jvp(f, (x,), (x,))) if transform is jvp else (lambda: jacfwd(f)(x))
    with pytest.raises(NotImplementedError, match=r"galfast\.ops\.aggregate .*jacrev"):
        run()


def test_gat_dropout_under_a_transform_names_the_op():
    graph, h = _graph(), _randn(NUM_NODES, 1, 2)
    alpha = _randn(NUM_NODES, 1, seed=1)
    with pytest.raises(NotImplementedError, match=r"gat_aggregate with dropout > 0 .*dropout=0"):
        grad(lambda h: gat_aggregate(graph, h, alpha, alpha, dropout=0.5).sum())(h)


def test_nan_weights_under_vmap_raise_the_eager_error():
    graph, x = _graph(), _randn(NUM_NODES, 3)
    weights = torch.ones(BATCH, graph.num_edges, dtype=torch.float64)
    weights[1, 2] = torch.nan
    with pytest.raises(ValueError, match="edge_weight contains NaN"):
        vmap(lambda w: aggregate(graph, x, w))(weights)
