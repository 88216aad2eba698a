"""The peer of galfast's CompGCN layer in bench/bench_compgcn.py: CompGCN's layer as its
authors wrote it (github.com/malllabiisc/CompGCN, model/compgcn_conv.py and
model/message_passing.py), in plain PyTorch. Every direction materialises its per-edge messages
phi(x_j, z_r) W ([E, F]), scales them by the edge norm and scatters them with ``scatter_add_``
on an index broadcast over the features, which is what torch_scatter's ``scatter(...,
reduce="sum")`` runs (torch_scatter is not installed here). Correlation is their ``ccorr``: an
rFFT pair per edge. The norms are recomputed every call, as theirs."""

from __future__ import annotations

import torch
from torch import Tensor


def ccorr(a: Tensor, b: Tensor) -> Tensor:
    spectrum = torch.fft.rfft(a, dim=-1).conj() * torch.fft.rfft(b, dim=-1)
    return torch.fft.irfft(spectrum, n=a.size(-1), dim=-1)


def scatter_sum(src: Tensor, index: Tensor, dim_size: int) -> Tensor:
    out = src.new_zeros(dim_size, src.size(1))
    return out.scatter_add_(0, index.view(-1, 1).expand_as(src), src)


class ReferenceCompGCNConv(torch.nn.Module):
    """Same parameters and maths as galfast.nn.CompGCNConv (copy its state_dict in)."""

    def __init__(self, in_channels, out_channels, num_relations, composition, dropout, act):
        super().__init__()
        self.num_relations, self.composition, self.act = num_relations, composition, act

        def param(*shape):
            return torch.nn.Parameter(torch.nn.init.xavier_normal_(torch.empty(*shape)))

        self.w_in, self.w_out = param(in_channels, out_channels), param(in_channels, out_channels)
        self.w_loop, self.w_rel = param(in_channels, out_channels), param(in_channels, out_channels)
        self.loop_rel = param(1, in_channels)
        self.drop = torch.nn.Dropout(dropout)
        self.bn = torch.nn.BatchNorm1d(out_channels)

    def compose(self, x: Tensor, z: Tensor) -> Tensor:
        if self.composition == "sub":
            return x - z
        if self.composition == "mult":
            return x * z
        return ccorr(x, z)

    @staticmethod
    def compute_norm(index: Tensor, num_nodes: int) -> Tensor:
        row, col = index
        ones = torch.ones(row.numel(), dtype=torch.float32, device=row.device)
        deg = torch.zeros(num_nodes, device=row.device).scatter_add_(0, row, ones)
        inv = deg.pow(-0.5)
        inv[inv == float("inf")] = 0
        return inv[row] * ones * inv[col]

    def propagate(self, index, types, x, rel, weight, norm):
        msgs = self.compose(torch.index_select(x, 0, index[1]), torch.index_select(rel, 0, types))
        msgs = torch.mm(msgs, weight)
        if norm is not None:
            msgs = msgs * norm.view(-1, 1)
        return scatter_sum(msgs, index[0], x.size(0))

    def forward(self, x: Tensor, edge_index: Tensor, edge_type: Tensor, rel: Tensor):
        """edge_index / edge_type: the triples followed by their inverses, as CompGCN's loader
        builds them."""
        rel = torch.cat([rel, self.loop_rel], 0)
        half, n = edge_index.size(1) // 2, x.size(0)
        in_index, out_index = edge_index[:, :half], edge_index[:, half:]
        loop_index = torch.arange(n, device=x.device).repeat(2, 1)
        loop_type = torch.full((n,), rel.size(0) - 1, dtype=torch.long, device=x.device)
        in_res = self.propagate(
            in_index, edge_type[:half], x, rel, self.w_in, self.compute_norm(in_index, n)
        )
        loop_res = self.propagate(loop_index, loop_type, x, rel, self.w_loop, None)
        out_res = self.propagate(
            out_index, edge_type[half:], x, rel, self.w_out, self.compute_norm(out_index, n)
        )
        out = self.drop(in_res) * (1 / 3) + self.drop(out_res) * (1 / 3) + loop_res * (1 / 3)
        return self.act(self.bn(out)), torch.matmul(rel, self.w_rel)[:-1]
