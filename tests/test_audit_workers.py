"""galfast.audit's fits on several threads (``workers``): the report is the one the fits give
one after the other, whatever the thread count or order."""

import os
import threading

import pytest
import torch

from galfast import Graph, SensitiveAttribute, audit
from galfast.audit import SearchConfig
from galfast.audit.jobs import Jobs, default_workers, seeded_init
from galfast.models import AttackerMLP

SEARCH = SearchConfig(trials=3, max_epochs=15, patience=3)


def _case(n=160, seed=0):
    gen = torch.Generator().manual_seed(seed)
    a = torch.randint(2, (n,), generator=gen)
    job = torch.randint(3, (n,), generator=gen)
    z = torch.randn(n, 4, generator=gen)
    z[:, 0] += a.float()
    z[:, 1] += 0.7 * job.float()
    edges = torch.randint(n, (2, 4 * n), generator=gen)
    graph = Graph.from_edge_index(edges, n, symmetrize=True)
    attrs = [
        SensitiveAttribute("a", "binary", a),
        SensitiveAttribute("job", "categorical", job, num_classes=3),
    ]
    return z, graph, attrs


@pytest.mark.parametrize("strength", ["fast", "strong"])
def test_reports_do_not_depend_on_workers(strength):
    z, graph, attrs = _case()
    kwargs = dict(
        graph=graph, train_idx=torch.arange(110), test_idx=torch.arange(110, 160),
        attacks=("node", "neighbor"), seeds=2, min_steps=30, epochs=2, strength=strength,
        search=SEARCH, task_labels=attrs[0].values,
    )  # fmt: skip
    one = audit(z, attrs, workers=1, **kwargs).to_json()
    assert audit(z, attrs, workers=3, **kwargs).to_json() == one


def test_reports_do_not_depend_on_the_cost_estimates(monkeypatch):
    # Reversed estimates start the cheapest fits first: another order, the same report.
    from galfast.audit import audit_embeddings, job_costs, strong_attacks

    z, graph, attrs = _case()
    kwargs = dict(
        graph=graph, train_idx=torch.arange(110), test_idx=torch.arange(110, 160),
        attacks=("node", "neighbor"), seeds=2, min_steps=30, epochs=2, strength="strong",
        search=SEARCH, workers=2,
    )  # fmt: skip
    want = audit(z, attrs, **kwargs).to_json()
    for module in (audit_embeddings, strong_attacks):
        monkeypatch.setattr(module, "head_cost", lambda *a: -job_costs.head_cost(*a))
    monkeypatch.setattr(strong_attacks, "classic_cost", lambda *a: -job_costs.classic_cost(*a))
    assert audit(z, attrs, **kwargs).to_json() == want


def test_jobs_start_the_costliest_first():
    # Both workers held: the queue fills; then one worker drains it alone, in cost order
    # (equal costs in submission order). Thread workers: the calls share the test's events.
    jobs = Jobs(2, 1, processes=False)
    release = [threading.Event(), threading.Event()]
    started = []
    try:
        holds = [jobs.submit(event.wait, cost=1e9) for event in release]
        runs = [
            jobs.submit(started.append, name, cost=cost)
            for name, cost in [("a", 1.0), ("b", 5.0), ("c", 3.0), ("d", 5.0), ("e", 0.0)]
        ]
        release[0].set()
        holds[0].result()
        for run in runs:
            run.result()
        assert started == ["b", "d", "c", "a", "e"]
    finally:
        release[1].set()
        jobs.close()


def test_closing_cancels_the_queued_jobs():
    jobs = Jobs(2, 1, processes=False)  # thread workers: the calls share the test's event
    release = threading.Event()
    holds = [jobs.submit(release.wait) for _ in range(2)]
    queued = jobs.submit(pow, 2, 2)
    closer = threading.Thread(target=jobs.close)
    closer.start()
    closer.join(0.2)  # close() drops the queue, then waits for the two running calls
    release.set()
    closer.join()
    assert all(h.result() for h in holds)
    assert queued.done()  # cancelled, not left for a waiter to hang on
    assert queued.cancelled() or queued.result() == 4


def test_seeded_init_is_the_seeded_generator_and_leaves_it_alone():
    torch.manual_seed(123)
    state = torch.random.get_rng_state()
    with seeded_init(5):
        first = AttackerMLP(4, 2).net[0].weight.clone()
    assert torch.equal(torch.random.get_rng_state(), state)
    torch.manual_seed(5)
    assert torch.equal(AttackerMLP(4, 2).net[0].weight, first)


def test_seeded_init_holds_other_threads_back():
    # The generator is global: a second thread's seeded_init waits until the first is done.
    entered = threading.Event()

    def other():
        with seeded_init(2):
            entered.set()

    with seeded_init(1):
        thread = threading.Thread(target=other)
        thread.start()
        assert not entered.wait(0.5)
    thread.join()
    assert entered.is_set()


def test_jobs_return_in_order_and_raise_the_fits_error():
    jobs = Jobs(2, 1)
    try:
        futures = [jobs.submit(pow, k, 2) for k in range(10)]
        assert [f.result() for f in futures] == [k * k for k in range(10)]
        failing = jobs.submit(int, "not a number")
        with pytest.raises(ValueError, match="not a number"):
            failing.result()
    finally:
        jobs.close()
    # One worker: the call runs at once, and its error is raised right there.
    with pytest.raises(ValueError, match="not a number"):
        Jobs(1, 1).submit(int, "not a number")


def test_bad_workers():
    z, graph, attrs = _case(n=40)
    base = dict(train_idx=torch.arange(30), test_idx=torch.arange(30, 40), attacks=("node",))
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="workers"):
            audit(z, attrs[0], workers=bad, **base)


def test_no_more_workers_start_than_there_are_fits(monkeypatch):
    # workers=1000 forked 1000 processes for a handful of fits, 10**6 forked for ever; the
    # default (up to 8) forked as many for any audit.
    from galfast.audit import audit_embeddings

    started = []

    def jobs(workers, threads, processes=None, most=None):
        started.append(Jobs(workers, threads, processes, most=most)._workers)  # forks nothing
        return Jobs(1, threads)  # the fits run here: the worker count is what is checked

    monkeypatch.setattr(audit_embeddings, "Jobs", jobs)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)), raising=False)
    z, graph, attrs = _case(n=40)
    base = dict(train_idx=torch.arange(30), test_idx=torch.arange(30, 40), epochs=1)
    audit(z, attrs, attacks=("node",), seeds=2, workers=10**6, min_steps=1, **base)
    strong = dict(strength="strong", search=SearchConfig(trials=2, max_epochs=2, patience=1))
    audit(z, attrs[0], attacks=("node",), seeds=1, workers=1000, **strong, **base)
    audit(z, attrs[0], attacks=("node",), seeds=1, min_steps=1, **base)
    # 2 attributes x 2 seeds x (mlp, linear); mlp, linear, tuned-mlp's 2 trials, knn, hgb;
    # the default's 8 processes (64 cores) for mlp and linear.
    assert started == [8, 6, 2]


@pytest.mark.parametrize(
    "cores, processes, threads", [(1, 1, 1), (2, 2, 2), (3, 3, 2), (16, 8, 2), (64, 8, 2)]
)
def test_default_workers_follow_the_usable_cores(monkeypatch, cores, processes, threads):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    assert default_workers() == processes
    assert default_workers(processes=False) == threads


def test_affine_calls_wait_for_their_worker_while_the_others_run():
    # Thread workers: worker 0 is held by an affine call; a second affine call must wait for
    # it, while the other worker takes the plain calls queued behind it.
    jobs = Jobs(2, 1, processes=False)
    release = threading.Event()
    ran = []
    try:
        hold = jobs.submit(release.wait, cost=1e9, affinity="a")
        second = jobs.submit(ran.append, "affine", cost=1e8, affinity="a")
        plain = [jobs.submit(ran.append, k, cost=1.0) for k in range(3)]
        for f in plain:
            f.result()
        assert ran == [0, 1, 2] and not second.done()
        release.set()
        second.result()
        assert hold.result() and ran[-1] == "affine"
    finally:
        release.set()
        jobs.close()
