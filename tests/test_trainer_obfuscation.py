"""End-to-end GAL on planted graphs, judged by galfast.audit: the attribute leaks without a
defence, a strong defence (TV or Wasserstein) hides it at little task cost, and a node-level
defence leaves it readable through neighbours.

The planted graph (tests/gal_fixtures.py): A in the features and in 90%-homophilous edges, the
task label Y independent of A. A balanced binary A: the majority-class baseline's macro-F1 is
about 0.33 and an attacker at chance scores about 0.5.
"""

import pytest
import torch
from gal_fixtures import MeanEncoder, planted_bipartite, planted_graph
from torch import nn

from galfast import GALTrainer, SensitiveAttribute, audit
from galfast.models import AttackerMLP
from galfast.train import NodeBatches, NodeHead, classification_loss

# The stated bound: a strong defence may cost at most this much task accuracy.
TASK_ACCURACY_BOUND = 0.05


# Tiny tensors: one thread avoids oversubscribing shared 2-core machines.
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def planted():
    return planted_graph()


def _train(data, sensitive, lam, distance="tv", epochs=200, init_seed=0, task_nodes=None):
    """GAL with the paper's recipe: 20 task-only epochs, then an adversary step (a 2-output
    MLP attacker, learning rate lr * lam) after every full-graph task step."""
    torch.manual_seed(init_seed)
    trainer = GALTrainer(
        MeanEncoder(data.x.size(1)),
        NodeHead(nn.Linear(8, 2)),
        AttackerMLP(8, 2),
        task_loss=classification_loss,
        lam=lam,
        distance=distance,
        pretrain_epochs=20,
    )
    nodes = data.train if task_nodes is None else task_nodes
    trainer.fit(
        data.graph,
        NodeBatches(nodes, data.y[nodes]),
        sensitive,
        epochs=epochs,
        x=data.x,
        progress=False,
    )
    z = trainer.embed()
    accuracy = (
        (trainer.task_head.module(z[data.test]).argmax(1) == data.y[data.test]).float().mean()
    )
    return z, float(accuracy)


@pytest.fixture(scope="module")
def undefended(planted):
    attr = SensitiveAttribute("a", "binary", planted.a)
    z, accuracy = _train(planted, attr, lam=0.0, epochs=100)
    report = audit(
        z, attr, train_idx=planted.train, test_idx=planted.test, attacks=("node",), seeds=2
    )
    return report, accuracy


def test_without_defence_the_attribute_leaks(undefended):
    report, accuracy = undefended
    worst = report.worst_case("a")
    assert worst.metrics["macro_f1"].mean > worst.baseline["macro_f1"] + 0.4
    assert accuracy > 0.9


# A defended run's attacker score swings with the run's initial weights (and so with how a CPU
# rounds): over eight initialisations and both distances, macro-F1 0.31 to 0.65 (mean 0.48, sd
# 0.09) and accuracy 0.41 to 0.65 (mean 0.51, sd 0.07) on 90 test nodes, where an uninformed
# attacker scores about 0.5 (a constant guess of the test majority already has accuracy 0.58).
# The bound applies to the mean over three initialisations (sd / sqrt(3)): it sits more than
# three of its standard deviations above the mean, and far below the undefended run (macro-F1
# 0.86 to 1.0 over the same eight initialisations).
DEFENDED_INITS = (0, 1, 2)
HIDDEN_BOUND = 0.65


@pytest.mark.parametrize("distance", ["tv", "wasserstein"])
def test_strong_defence_hides_the_attribute_and_keeps_the_task(planted, undefended, distance):
    attr = SensitiveAttribute("a", "binary", planted.a)
    f1s, attacker_accuracies, task_accuracies = [], [], []
    for init_seed in DEFENDED_INITS:
        z, accuracy = _train(planted, attr, lam=10.0, distance=distance, init_seed=init_seed)
        report = audit(
            z, attr, train_idx=planted.train, test_idx=planted.test, attacks=("node",), seeds=2
        )
        worst = report.worst_case("a")  # the strongest of the MLP and linear attackers
        f1s.append(worst.metrics["macro_f1"].mean)
        attacker_accuracies.append(worst.metrics["accuracy"].mean)
        task_accuracies.append(accuracy)
    undefended_f1 = undefended[0].worst_case("a").metrics["macro_f1"].mean
    assert sum(f1s) / len(f1s) < HIDDEN_BOUND < undefended_f1, f1s
    assert sum(attacker_accuracies) / len(f1s) < HIDDEN_BOUND, attacker_accuracies
    assert sum(task_accuracies) / len(f1s) >= undefended[1] - TASK_ACCURACY_BOUND, task_accuracies


def test_node_level_defence_leaves_the_attribute_readable_through_neighbours():
    # Users carry A only through the items they link to; items must keep their type (their
    # task), which is their users' A. Defending users' own embeddings leaves items open.
    # Over eight initialisations the node attacker's macro-F1 ranges 0.36 to 0.74 (mean 0.49,
    # sd 0.12) and the neighbour attacker's is 0.93 every time; the bounds apply to means over
    # three initialisations, 3.5 of their standard deviations away.
    data = planted_bipartite(user_signal=0.0)
    users = torch.arange(150)
    attr = SensitiveAttribute("a", "binary", data.a, index=users)
    task_nodes = torch.cat([data.train, torch.arange(150, 300)])
    nodes, neighbours = [], []
    for init_seed in DEFENDED_INITS:
        z, _ = _train(
            data, attr, lam=10.0, distance="wasserstein", init_seed=init_seed, task_nodes=task_nodes
        )
        report = audit(
            z,
            attr,
            graph=data.graph,
            train_idx=data.train,
            test_idx=data.test,
            attacks=("node", "neighbor"),
            seeds=2,
        )
        nodes.append(report.result("a", "node").metrics["macro_f1"].mean)
        neighbours.append(report.result("a", "neighbor").metrics["macro_f1"].mean)
    node, neighbour = sum(nodes) / len(nodes), sum(neighbours) / len(neighbours)
    assert node < 0.75, nodes
    assert neighbour > 0.85 and neighbour > node + 0.2, (nodes, neighbours)
