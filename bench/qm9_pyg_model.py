"""The peer of galfast's GAL QM9 model in bench/gal_qm9_epoch.py: PyG's
``examples/qm9_nn_conv.py`` ``Net`` on PyG's layers (``NNConv``, ``Set2Set``; the same GRU and
linear layers), its data pipeline (one ``Data`` per molecule, ``T.Complete()`` and
``T.Distance(norm=False)`` applied per molecule as the dataset's transform, batches collated
by ``Batch.from_data_list`` as PyG's ``DataLoader`` does) and GAL's adversary step: the
Set2Set readout through a gradient reversal into an MLP regressing alpha, its own Adam over
(attacker, model) at ``lr * lambda``.

:func:`from_galfast` copies the weights of a galfast ``MPNN`` and ``AttackerMLP`` (the state
dicts are interchangeable), so both sides compute the same function.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from torch import nn

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import torch_geometric.transforms as T
    from torch_geometric.data import Batch, Data
    from torch_geometric.nn import NNConv, Set2Set
    from torch_geometric.utils import remove_self_loops


class GradReverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return -grad


class Net(nn.Module):
    """PyG's example ``Net`` (dim 64), with the readout split out for the adversary."""

    def __init__(self, in_channels: int, edge_channels: int, dim: int = 64):
        super().__init__()
        self.lin0 = nn.Linear(in_channels, dim)
        edge_nn = nn.Sequential(nn.Linear(edge_channels, 128), nn.ReLU(), nn.Linear(128, dim * dim))
        self.conv = NNConv(dim, dim, edge_nn, aggr="mean")
        self.gru = nn.GRU(dim, dim)
        self.set2set = Set2Set(dim, processing_steps=3)
        self.lin1 = nn.Linear(2 * dim, dim)
        self.lin2 = nn.Linear(dim, 1)

    def readout(self, data):
        out = F.relu(self.lin0(data.x))
        h = out.unsqueeze(0)
        for _ in range(3):
            m = F.relu(self.conv(out, data.edge_index, data.edge_attr))
            out, h = self.gru(m.unsqueeze(0), h)
            out = out.squeeze(0)
        return self.set2set(out, data.batch)

    def forward(self, data):
        return self.lin2(F.relu(self.lin1(self.readout(data))))


def molecule_data(dataset, position: int, y: torch.Tensor, alpha: torch.Tensor) -> Data:
    """Molecule `position` of a galfast ``MoleculeDataset`` as PyG's QM9 stores it (bonds, both
    directions, 4 bond-type columns), with the task target and the attribute."""
    a0, a1 = int(dataset.node_ptr[position]), int(dataset.node_ptr[position + 1])
    e0, e1 = int(dataset.edge_ptr[position]), int(dataset.edge_ptr[position + 1])
    return Data(
        x=dataset.x[a0:a1],
        pos=dataset.pos[a0:a1],
        edge_index=dataset.edge_index[:, e0:e1],
        edge_attr=dataset.edge_attr[e0:e1],
        y=y[position].view(1, 1),
        alpha=alpha[position].view(1, 1),
    )


class Complete:
    """The example's own ``Complete`` transform: every ordered pair of distinct atoms, bond
    features kept and zeros for the other pairs."""

    def __call__(self, data: Data) -> Data:
        n = data.num_nodes
        source = torch.arange(n).repeat_interleave(n)
        target = torch.arange(n).repeat(n)
        attr = data.edge_attr.new_zeros(n * n, data.edge_attr.size(1))
        attr[data.edge_index[0] * n + data.edge_index[1]] = data.edge_attr
        edge_index, edge_attr = remove_self_loops(torch.stack([source, target]), attr)
        data.edge_index, data.edge_attr = edge_index, edge_attr
        return data


# The example's transform (its MyTransform only picks the target column, done in molecule_data).
TRANSFORM = T.Compose([Complete(), T.Distance(norm=False)])


def collate(molecules: list[Data]) -> Batch:
    """What ``DataLoader(dataset, batch_size=128)`` yields: each ``dataset[i]`` transformed,
    then collated."""
    return Batch.from_data_list([TRANSFORM(m.clone()) for m in molecules])


def attacker_copy(attacker) -> nn.Sequential:
    layers = []
    for layer in attacker.net:
        if isinstance(layer, nn.Linear):
            copy = nn.Linear(layer.in_features, layer.out_features)
            copy.load_state_dict(layer.state_dict())
            layers.append(copy)
        else:
            layers.append(nn.LeakyReLU(layer.negative_slope))
    return nn.Sequential(*layers)


def from_galfast(mpnn, attacker) -> tuple[Net, nn.Sequential]:
    net = Net(mpnn.lin0.in_features, mpnn.conv.nn[0].in_features, mpnn.lin0.out_features)
    net.load_state_dict(mpnn.state_dict(), strict=True)
    return net, attacker_copy(attacker)


class ReferenceGAL:
    """GAL's loop: a task step (MSE on mu) then an adversary step (MSE on alpha) per batch."""

    def __init__(self, net: Net, attacker: nn.Module, lr: float, lam: float):
        self.net, self.attacker = net, attacker
        self.task_opt = torch.optim.Adam(net.parameters(), lr=lr)
        self.adv_opt = torch.optim.Adam([*attacker.parameters(), *net.parameters()], lr=lr * lam)

    def step(self, data: Batch) -> tuple[float, float]:
        self.net.train()
        loss = F.mse_loss(self.net(data).view(-1), data.y.view(-1))
        self.task_opt.zero_grad()
        loss.backward()
        self.task_opt.step()
        pred = self.attacker(GradReverse.apply(self.net.readout(data)))
        adv_loss = F.mse_loss(pred.view(-1), data.alpha.view(-1))
        self.adv_opt.zero_grad()
        adv_loss.backward()
        self.adv_opt.step()
        return float(loss.detach()), float(adv_loss.detach())
