"""Arguments users pass to the generated datasets and their helpers that used to fail deep
inside NumPy/torch, allocate for minutes, or give wrong results silently; each is now a
ValueError naming the argument, or correct behaviour."""

import time

import numpy as np
import pytest
import torch

from galfast.datasets.complete_graph import complete_graph
from galfast.datasets.homophily import edge_homophily
from galfast.datasets.molecule_split import paper_split, target_statistics
from galfast.datasets.synthetic_graph import synthetic_graph
from galfast.datasets.synthetic_movielens import synthetic_movielens
from galfast.datasets.synthetic_movielens_1m import synthetic_movielens_1m

HUGE = 10**15  # beyond any machine's memory


def _graph(**kwargs):
    return synthetic_graph(**{"num_nodes": 30, "avg_degree": 4.0, "num_features": 4, **kwargs})


def _ratings(*sizes, **kwargs):
    return synthetic_movielens(*(sizes or (12, 10, 30)), **kwargs)


# ------------------------------------------------------------------ counts
@pytest.mark.parametrize(
    "make, argument, value",
    [
        # TypeErrors from NumPy ("expected a sequence of integers", "'<' not supported", ...)
        (lambda v: _graph(num_nodes=v), "num_nodes", 10.0),
        (lambda v: _graph(num_nodes=v), "num_nodes", "10"),
        (lambda v: _graph(num_nodes=v), "num_nodes", None),
        (lambda v: _graph(num_nodes=v), "num_nodes", True),
        (lambda v: _graph(num_classes=v), "num_classes", 2.5),
        (lambda v: _graph(num_attribute_classes=v), "num_attribute_classes", 3.0),
        (lambda v: _graph(num_features=v), "num_features", 2.5),
        (lambda v: _graph(num_features=v), "num_features", True),
        (lambda v: _ratings(v, 10, 20), "num_users", 2.5),
        (lambda v: _ratings(12, v, 20), "num_movies", True),
        (lambda v: _ratings(12, 10, v), "num_ratings", 2.5),
        (lambda v: _ratings(12, 10, v), "num_ratings", True),
        (lambda v: _ratings(num_factors=v), "num_factors", 2.5),
        (lambda v: paper_split(v, num_test=2, num_val=2), "num_molecules", 10.5),  # float ids
        (lambda v: paper_split(v, num_test=2, num_val=2), "num_molecules", True),
        (lambda v: paper_split(10, num_test=v, num_val=2), "num_test", 2.5),
    ],
)
def test_counts_must_be_ints(make, argument, value):
    with pytest.raises(ValueError, match=f"{argument} must be an int"):
        make(value)


def test_integer_counts_of_any_integer_type_are_accepted():
    a = _graph(num_nodes=np.int64(30), num_classes=np.int32(3))
    b = _graph(num_nodes=30, num_classes=3)
    assert torch.equal(a.y, b.y) and a.num_nodes == 30 and isinstance(a.num_nodes, int)
    assert torch.equal(_ratings(np.int64(12), 10, 30).ratings, _ratings(12, 10, 30).ratings)


def test_tensor_and_numpy_settings_draw_the_dataset_of_plain_numbers():
    # 0-d tensors were refused as strengths and shares ("must be a real number")
    given = _graph(
        num_nodes=torch.tensor(30),
        num_classes=np.int64(3),
        attribute_homophily=torch.tensor(0.75),
        avg_degree=np.float32(4.0),
        task_feature_strength=torch.tensor(1.5),
        val_fraction=torch.tensor(0.25),
        test_fraction=np.float64(0.25),
        seed=torch.tensor(7),
    )
    plain = _graph(
        num_nodes=30,
        num_classes=3,
        attribute_homophily=0.75,
        avg_degree=4.0,
        task_feature_strength=1.5,
        val_fraction=0.25,
        test_fraction=0.25,
        seed=7,
    )
    assert torch.equal(given.x, plain.x) and torch.equal(given.y, plain.y)
    for name in ("train_pos", "val_pos", "val_neg", "test_pos", "test_neg"):
        assert torch.equal(getattr(given.link_split, name), getattr(plain.link_split, name))
    assert given.notes == plain.notes  # the settings noted as Python numbers
    shares = dict(attribute_strength=torch.tensor(0.5), test_fraction=torch.tensor(0.25))
    given = _ratings(torch.tensor(12), np.int32(10), 30, seed=torch.tensor(3), **shares)
    plain = _ratings(12, 10, 30, seed=3, attribute_strength=0.5, test_fraction=0.25)
    assert torch.equal(given.ratings, plain.ratings) and torch.equal(given.test_idx, plain.test_idx)
    assert given.notes == plain.notes


@pytest.mark.parametrize("seed", [True, np.bool_(True), 7.0, np.float64(7), torch.tensor(7.0)])
def test_generators_refuse_seeds_that_are_not_ints(seed):
    for make in (lambda: _graph(seed=seed), lambda: _ratings(seed=seed)):
        with pytest.raises(ValueError, match="^seed must be an int, got"):
            make()


def test_paper_split_takes_numpy_counts_and_gives_int_ids():
    train, val, test = paper_split(np.int64(10), num_test=2, num_val=2)
    assert train.dtype == val.dtype == test.dtype == torch.int64


@pytest.mark.parametrize(
    "make, message",
    [
        # MemoryError ("Unable to allocate 7.28 TiB"), or minutes of allocating and drawing
        (lambda: _graph(num_nodes=HUGE), "synthetic_graph: these sizes need"),
        (lambda: _graph(num_features=HUGE), "synthetic_graph: these sizes need"),
        (lambda: _graph(num_classes=HUGE), "synthetic_graph: these sizes need"),
        (lambda: _graph(avg_degree=1e15), "synthetic_graph: these sizes need"),
        (lambda: _ratings(HUGE, HUGE, 10), "synthetic_movielens: these sizes need"),
        (lambda: _ratings(10, HUGE, 10), "synthetic_movielens: these sizes need"),
        (lambda: _ratings(num_factors=HUGE), "synthetic_movielens: these sizes need"),
        (lambda: paper_split(HUGE), "paper_split: these sizes need"),  # a torch RuntimeError
    ],
)
def test_sizes_beyond_memory_are_refused_at_once(make, message):
    start = time.perf_counter()
    with pytest.raises(ValueError, match=message):
        make()
    assert time.perf_counter() - start < 2


# ------------------------------------------------------------------ floats and seeds
@pytest.mark.parametrize(
    "make, argument, value",
    [
        (lambda v: _graph(attribute_homophily=v), "attribute_homophily", None),  # '<=' TypeError
        (lambda v: _graph(task_homophily=v), "task_homophily", "0.5"),
        (lambda v: _graph(avg_degree=v), "avg_degree", True),  # was read as 1.0
        (lambda v: _ratings(attribute_strength=v), "attribute_strength", "1"),
        (lambda v: synthetic_movielens_1m(0, gender_strength=v), "gender_strength", "1"),
        (lambda v: synthetic_movielens_1m(0, age_strength=v), "age_strength", True),
    ],
)
def test_float_settings_must_be_numbers(make, argument, value):
    with pytest.raises(ValueError, match=f"{argument} must be a finite number"):
        make(value)


@pytest.mark.parametrize(
    "make, message",
    [
        # checked only after the whole dataset was drawn (ML-1M: seconds)
        (lambda: synthetic_movielens_1m(0, test_fraction=2.0), "test_fraction must lie in"),
        (lambda: synthetic_movielens_1m(0, test_fraction="0.1"), "test_fraction must be a finite"),
        (lambda: _ratings(test_fraction=None), "test_fraction must be a finite"),
        (lambda: _graph(val_fraction="0.1"), "val_fraction must be a finite"),
        (lambda: _graph(val_fraction=0.5, test_fraction=0.5), "must have a sum below 1"),
        (lambda: _ratings(test_fraction=1.0), "test_fraction must lie in \\[0, 1\\)"),
        (lambda: _ratings(test_fraction=float("nan")), "test_fraction must be a finite"),
    ],
)
def test_held_out_shares_are_checked_before_drawing(make, message):
    start = time.perf_counter()
    with pytest.raises(ValueError, match=message):
        make()
    assert time.perf_counter() - start < 0.5


@pytest.mark.parametrize("seed", [np.int64(7), np.uint32(7)])
def test_numpy_integer_seeds_are_accepted_and_equal_to_ints(seed):
    # refused: "seed must be an int >= 0, got np.int64(7)"
    assert torch.equal(_graph(seed=seed).y, _graph(seed=7).y)
    assert torch.equal(_ratings(seed=seed).ratings, _ratings(seed=7).ratings)


@pytest.mark.parametrize(
    "seed, message",
    [
        (-1, "seed must lie in \\[0, 2\\*\\*64\\), got -1"),  # silently accepted
        (2**64, "seed must lie in \\[0, 2\\*\\*64\\)"),  # "Overflow when unpacking long"
        (1.5, "seed must be an int, got float"),  # RuntimeError from manual_seed
        (True, "seed must be an int, got bool"),
    ],
)
def test_paper_split_checks_its_seed(seed, message):
    with pytest.raises(ValueError, match=message):
        paper_split(10, num_test=2, num_val=2, seed=seed)


def test_generators_are_reproducible_on_edge_sizes():
    for size in (2, 3):
        a, b = _graph(num_nodes=size, seed=5), _graph(num_nodes=size, seed=5)
        assert torch.equal(a.graph.edge_index(), b.graph.edge_index())
        edges = a.graph.edge_index()
        assert bool((edges[0] != edges[1]).all())  # no self loops
    lonely = _ratings(1, 2, 1)
    assert lonely.num_ratings == 1 and torch.equal(lonely.ratings, _ratings(1, 2, 1).ratings)


# ------------------------------------------------------------------ molecule helpers
@pytest.mark.parametrize(
    "index, message",
    [
        (torch.tensor([0, 9]), "not a row"),  # IndexError
        (torch.tensor([0, -1]), "not a row"),  # silently took the last molecule
        (torch.tensor([0.0, 1.0]), "integer ids or a bool mask"),  # IndexError
        ([0, 1], "must be a torch.Tensor"),  # AttributeError
        (torch.tensor([True, False, False, False, False]), "at least two molecules"),  # NaN std
    ],
)
def test_target_statistics_checks_its_index(index, message):
    with pytest.raises(ValueError, match=message):
        target_statistics(torch.randn(5, 2), index)


def test_target_statistics_of_integer_targets_are_not_truncated():
    # mean and std were cast back to int64: tensor(1), tensor(1)
    mean, std = target_statistics(torch.tensor([0, 1, 3]), torch.tensor([0, 1, 2]))
    assert mean.item() == pytest.approx(4 / 3) and std.item() == pytest.approx(1.5275, abs=1e-4)


def test_complete_graph_names_a_wrong_batch():
    with pytest.raises(ValueError, match="batch must be a MoleculeBatch"):
        complete_graph(torch.zeros(3))


# ------------------------------------------------------------------ edge homophily
@pytest.mark.parametrize(
    "edge_index, labels, message",
    [
        (torch.tensor([[0, 1], [1, 5]]), torch.tensor([0, 0, 1]), "not a node of labels"),
        (torch.tensor([[0, 1], [1, -1]]), torch.tensor([0, 0, 1]), "not a node of labels"),
        (torch.tensor([[0.0, 1.0], [1.0, 2.0]]), torch.tensor([0, 0, 1]), "integer node ids"),
        (np.array([[0, 1], [1, 2]]), torch.tensor([0, 0, 1]), "must be a torch.Tensor"),
        (torch.tensor([[0, 1], [1, 2]]), np.array([0, 0, 1]), "must be a torch.Tensor"),
        (torch.tensor([[0, 1], [1, 2]]), torch.tensor([[0, 1], [0, 1], [1, 1]]), "\\[N\\]"),
        (torch.tensor([[0, 1], [1, 2]]), torch.tensor([0.0, float("nan"), 1.0]), "integer"),
    ],
)
def test_edge_homophily_checks_its_inputs(edge_index, labels, message):
    with pytest.raises(ValueError, match=message):
        edge_homophily(edge_index, labels)


def test_edge_homophily_takes_bool_and_int32_labels():
    edges = torch.tensor([[0, 1], [1, 2]], dtype=torch.int32)
    assert edge_homophily(edges, torch.tensor([True, True, False])) == 0.5
