"""galfast.ops.sample_neighbors against its plain-Python reference (the same counter-based
draws), the block invariants, reproducibility across calls, thread counts and devices, awkward
graphs and bad input."""

from __future__ import annotations

import pytest
import torch
from graphs import awkward_graphs, random_edges
from ref_sample_neighbors import reference_sample

from galfast import Graph
from galfast.ops import Block, sample_neighbors

SEED = 1234
FANOUTS = [[2], [3, 2], [-1, 1], [0, 4], [1, 1, 1]]


def graph_of(name: str) -> Graph:
    edge_index, num_nodes = awkward_graphs()[name]
    return Graph.from_edge_index(edge_index, num_nodes)


def weights_of(graph: Graph, zeros: bool = True) -> torch.Tensor:
    """Seeded weights in [0.1, 2), a quarter of them 0 when `zeros`."""
    g = torch.Generator().manual_seed(7)
    weight = torch.rand(graph.num_edges, generator=g, dtype=torch.float64) * 1.9 + 0.1
    if zeros:
        weight[torch.rand(graph.num_edges, generator=g) < 0.25] = 0.0
    return weight


def seeds_of(graph: Graph, count: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(3)
    return torch.randperm(graph.num_nodes, generator=g)[: min(count, graph.num_nodes)]


def as_lists(block: Block) -> tuple:
    return (
        block.num_dst,
        block.src_nodes.tolist(),
        block.rowptr.tolist(),
        block.col.tolist(),
        block.edge_id.tolist(),
    )


def assert_blocks_equal(a: list, b: list) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert as_lists(x) == as_lists(y)


@pytest.mark.parametrize("name", list(awkward_graphs()))
@pytest.mark.parametrize("fanouts", FANOUTS)
@pytest.mark.parametrize("weighted", [False, True])
def test_matches_reference(name, fanouts, weighted):
    graph = graph_of(name)
    seeds = seeds_of(graph, 6)
    weight = weights_of(graph) if weighted else None
    blocks = sample_neighbors(graph, seeds, fanouts, seed=SEED, batch=5, edge_weight=weight)
    expected = reference_sample(
        graph.rowptr.tolist(),
        graph.col.tolist(),
        seeds.tolist(),
        fanouts,
        SEED,
        5,
        None if weight is None else weight.tolist(),
    )
    assert [as_lists(b) for b in blocks] == [tuple(r) for r in expected]


def check_invariants(graph: Graph, seeds: torch.Tensor, fanouts: list, blocks: list, weight=None):
    dst = seeds
    degree = graph.in_degree
    for block, fanout in zip(blocks, fanouts):
        assert block.num_dst == dst.numel()
        assert torch.equal(block.dst_nodes, dst)  # destinations first, in their order
        assert block.src_nodes.unique().numel() == block.num_src  # one local id per node
        assert block.rowptr.numel() == block.num_dst + 1 and int(block.rowptr[0]) == 0
        assert int(block.rowptr[-1]) == block.num_edges
        assert bool((block.col >= 0).all()) and bool((block.col < block.num_src).all())
        # every sampled edge exists, from the stated source to the stated destination
        assert torch.equal(graph.col[block.edge_id], block.src_nodes[block.col])
        assert torch.equal(graph.row[block.edge_id], block.dst_nodes[block.row])
        # no edge (hence, on a coalesced graph, no source) twice per destination
        pairs = block.row * max(block.num_src, 1) + block.col
        assert pairs.unique().numel() == block.num_edges
        # fan-out respected, and every candidate taken when there are no more than fanout
        candidates = degree[dst]
        if weight is not None:
            positive = torch.zeros(graph.num_nodes, dtype=torch.long)
            positive.index_add_(0, graph.row, (weight > 0).long())
            candidates = positive[dst]
            assert bool((weight[block.edge_id] > 0).all())
        wanted = candidates if fanout < 0 else candidates.clamp(max=fanout)
        assert torch.equal(block.in_degree, wanted)
        # new nodes are numbered in order of first appearance in col
        new = block.col[block.col >= block.num_dst]
        if new.numel():
            first = torch.cat(
                [torch.ones(1, dtype=torch.bool), new[1:] > new[:-1].cummax(0).values]
            )
            assert torch.equal(new[first], torch.arange(block.num_dst, block.num_src))
        dst = block.src_nodes


@pytest.mark.parametrize("weighted", [False, True])
def test_block_invariants_on_a_random_graph(weighted):
    graph = Graph.from_edge_index(random_edges(500, 6000, seed=2), 500, symmetrize=True)
    weight = weights_of(graph) if weighted else None
    seeds = seeds_of(graph, 64)
    fanouts = [5, 3, -1]
    blocks = sample_neighbors(graph, seeds, fanouts, seed=SEED, edge_weight=weight)
    check_invariants(graph, seeds, fanouts, blocks, weight)


def test_all_neighbours_when_fanout_reaches_the_degree():
    graph = graph_of("hub")
    seeds = torch.tensor([0, 9, 4])
    full = sample_neighbors(graph, seeds, [-1], seed=1)[0]
    assert torch.equal(full.in_degree, graph.in_degree[seeds])
    for fanout in (3000, 5000):  # node 0 has in-degree 3000
        block = sample_neighbors(graph, seeds, [fanout], seed=2)[0]
        assert as_lists(block) == as_lists(full)
    # one below the degree is a real draw: one edge of the hub is left out
    assert sample_neighbors(graph, seeds, [2999], seed=1)[0].in_degree.tolist() == [2999, 1, 0]


def test_reproducible_across_calls_and_thread_counts():
    graph = Graph.from_edge_index(random_edges(20000, 400000, seed=4), 20000)
    # 6,000 seeds x 15: enough sampled edges for the CPU kernel to use every thread it is given
    seeds = seeds_of(graph, 6000)
    weight = weights_of(graph)
    previous = torch.get_num_threads()
    try:
        results = []
        for threads in (1, 2, 3, 1):
            torch.set_num_threads(threads)
            results.append(sample_neighbors(graph, seeds, [15, 10], seed=SEED, batch=9))
            results.append(
                sample_neighbors(graph, seeds, [15, 10], seed=SEED, batch=9, edge_weight=weight)
            )
    finally:
        torch.set_num_threads(previous)
    assert results[0][1].num_edges > 2 * 32768
    for k, blocks in enumerate(results):
        assert_blocks_equal(blocks, results[k % 2])


def test_batch_seed_and_layer_change_the_draws():
    graph = Graph.from_edge_index(random_edges(300, 9000, seed=5), 300)
    seeds = seeds_of(graph, 50)
    base = sample_neighbors(graph, seeds, [4], seed=SEED, batch=0)[0].edge_id
    for kwargs in ({"seed": SEED + 1, "batch": 0}, {"seed": SEED, "batch": 1}):
        assert not torch.equal(sample_neighbors(graph, seeds, [4], **kwargs)[0].edge_id, base)


def test_a_destination_draws_the_same_wherever_it_appears():
    graph = Graph.from_edge_index(random_edges(300, 9000, seed=5), 300)
    alone = sample_neighbors(graph, torch.tensor([17]), [4], seed=SEED)[0]
    among = sample_neighbors(graph, torch.tensor([3, 250, 17]), [4], seed=SEED)[0]
    assert torch.equal(among.edge_id[among.row == 2], alone.edge_id)


@pytest.mark.parametrize("name", list(awkward_graphs()))
def test_awkward_graphs(name):
    graph = graph_of(name)
    seeds = seeds_of(graph, 10)
    blocks = sample_neighbors(graph, seeds, [2, 2], seed=SEED)
    check_invariants(graph, seeds, [2, 2], blocks)
    if graph.num_edges == 0:
        assert all(b.num_edges == 0 and torch.equal(b.src_nodes, seeds) for b in blocks)


def test_self_loop_keeps_the_destination_local_id():
    graph = graph_of("self_loops")
    block = sample_neighbors(graph, torch.tensor([0]), [-1], seed=0)[0]  # in-edges 0->0, 2->0
    assert block.src_nodes.tolist() == [0, 2]  # the self loop's source is the destination
    assert block.col.tolist() == [0, 1]


def test_empty_seed_batch():
    graph = graph_of("random")
    blocks = sample_neighbors(graph, torch.empty(0, dtype=torch.long), [3, 3], seed=0)
    assert [(b.num_dst, b.num_src, b.num_edges) for b in blocks] == [(0, 0, 0), (0, 0, 0)]


def test_int32_seeds_and_float32_weights():
    graph = graph_of("random")
    seeds = seeds_of(graph, 8)
    weight = weights_of(graph)
    a = sample_neighbors(graph, seeds.int(), [3], seed=1, edge_weight=weight.float())
    b = sample_neighbors(graph, seeds, [3], seed=1, edge_weight=weight.float().double())
    assert_blocks_equal(a, b)


def test_workspace_is_clean_after_an_error():
    graph = graph_of("random")
    seeds = seeds_of(graph, 5)
    before = sample_neighbors(graph, seeds, [3, 3], seed=1)
    with pytest.raises(ValueError, match="twice"):
        sample_neighbors(graph, torch.tensor([1, 2, 1]), [3], seed=1)
    assert_blocks_equal(sample_neighbors(graph, seeds, [3, 3], seed=1), before)


def bad_calls():
    graph = graph_of("random")
    seeds = torch.tensor([0, 1, 2])
    ok = {"graph": graph, "seeds": seeds, "fanouts": [2], "seed": 0}
    weight = torch.ones(graph.num_edges)
    return [
        ({"graph": "g"}, "graph must be a galfast.Graph"),
        ({"seeds": [0, 1]}, "seeds must be a torch.Tensor"),
        ({"seeds": seeds.float()}, "seeds must hold int64 or int32"),
        ({"seeds": seeds.view(1, 3)}, r"seeds must have shape \[num_seeds\]"),
        ({"seeds": torch.tensor([0, 40])}, "not a node id in"),
        ({"seeds": torch.tensor([-1])}, "not a node id in"),
        ({"seeds": torch.tensor([4, 4])}, "holds node 4 twice"),
        ({"fanouts": 3}, "fanouts must be a sequence"),
        ({"fanouts": []}, "fanouts must hold 1 to 64"),
        ({"fanouts": [2] * 65}, "fanouts must hold 1 to 64"),
        ({"fanouts": [-2]}, r"fanouts\[0\] must lie in"),
        ({"fanouts": [2**26 + 1]}, r"fanouts\[0\] must lie in"),
        ({"fanouts": [2, 1.5]}, r"fanouts\[1\] must be an int"),
        ({"fanouts": [True]}, r"fanouts\[0\] must be an int"),
        ({"seed": -1}, "seed must lie in"),
        ({"seed": 2**64}, "seed must lie in"),
        ({"batch": 2**32}, "batch must lie in"),
        ({"edge_weight": weight[:-1]}, "edge_weight must have shape"),
        ({"edge_weight": weight.half()}, "edge_weight must be float32 or float64"),
        ({"edge_weight": weight.long()}, "edge_weight must be float32 or float64"),
        ({"edge_weight": -weight}, "finite and >= 0"),
        ({"edge_weight": weight * float("nan")}, "finite and >= 0"),
        ({"edge_weight": weight * float("inf")}, "finite and >= 0"),
        # keys -ln(u) / w overflowed: every edge of a row tied, always the first ones taken
        ({"edge_weight": weight.double() * 1e-320}, "positive weights below 1e-300"),
    ], ok


@pytest.mark.parametrize("case", range(len(bad_calls()[0])))
def test_bad_input_raises_a_clear_error(case):
    calls, ok = bad_calls()
    change, message = calls[case]
    kwargs = {**ok, **change}
    with pytest.raises(ValueError, match=message):
        sample_neighbors(kwargs.pop("graph"), kwargs.pop("seeds"), kwargs.pop("fanouts"), **kwargs)


def test_a_graph_edited_in_place_is_refused():
    edge_index, num_nodes = awkward_graphs()["random"]
    graph = Graph.from_edge_index(edge_index, num_nodes)
    graph.col[0] = 1
    with pytest.raises(ValueError, match="modified in place"):
        sample_neighbors(graph, torch.tensor([0]), [2], seed=0)


def test_kernel_rejects_a_corrupted_graph():
    edge_index, num_nodes = awkward_graphs()["random"]
    graph = Graph.from_edge_index(edge_index, num_nodes)
    graph.col.data[:] = 10**6  # an edit no version counter sees
    with pytest.raises(ValueError, match="col"):
        sample_neighbors(graph, torch.arange(num_nodes), [-1], seed=0)


@pytest.mark.cuda
@pytest.mark.parametrize("weighted", [False, True])
def test_cuda_matches_cpu(weighted):
    graph = Graph.from_edge_index(random_edges(5000, 120000, seed=6), 5000, symmetrize=True)
    # a hub, zero weights and an isolated seed too
    hub = torch.stack([torch.arange(1, 5000), torch.zeros(4999, dtype=torch.long)])
    graph = Graph.from_edge_index(torch.cat([graph.edge_index(), hub], 1), 5001)
    weight = weights_of(graph) if weighted else None
    seeds = torch.cat([seeds_of(graph, 1000), torch.tensor([5000])]).unique()
    for fanouts in ([15, 10], [-1, 3], [4000, 2]):
        cpu = sample_neighbors(graph, seeds, fanouts, seed=SEED, batch=3, edge_weight=weight)
        cuda = sample_neighbors(
            graph.to("cuda"),
            seeds.cuda(),
            fanouts,
            seed=SEED,
            batch=3,
            edge_weight=None if weight is None else weight.cuda(),
        )
        assert all(b.device.type == "cuda" for b in cuda)
        assert_blocks_equal([b.to("cpu") for b in cuda], cpu)


def test_sort_based_relabelling_numbers_as_the_cpu_kernel():
    """CUDA relabels by sorting (_relabel_sorted); it must number nodes exactly as the CPU
    kernel (first appearance). Plain torch, so it runs here on CPU tensors."""
    from galfast.ops.sample_neighbors import _relabel_cpu, _relabel_sorted

    graph = Graph.from_edge_index(random_edges(1000, 5000, seed=12), 1000)
    g = torch.Generator().manual_seed(13)
    for size in (0, 1, 50, 3000):
        dst = torch.randperm(1000, generator=g)[:40]
        src = torch.randint(0, 1000, (size,), generator=g)
        local, nodes = _relabel_cpu(graph, dst, src)
        local_sorted, nodes_sorted = _relabel_sorted(dst, src)
        assert torch.equal(local, local_sorted) and torch.equal(nodes, nodes_sorted)
        assert torch.equal(nodes[:40], dst) and torch.equal(nodes[local], src)
