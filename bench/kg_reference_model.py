"""The peer of galfast's GAL knowledge-graph model in bench/gal_kg_epoch.py: CompGCN-ConvE as
CompGCN's authors wrote it (github.com/malllabiisc/CompGCN: model/models.py ``CompGCNBase`` and
``CompGCN_ConvE``, data_loader.py ``TrainDataset``, run.py's training loop) with GAL's
adversary step added, in plain PyTorch.

What makes it "the reference way", and is kept because it is what its time is made of:
- the encoder is bench/compgcn_reference.py's layer: per-edge messages ``phi(x_j, z_r) W``
  materialised as ``[E, 200]`` tensors and scattered, norms recomputed every call;
- ConvE stacks the two embeddings with ``cat`` + ``transpose`` + ``reshape``, scores with
  ``sigmoid`` and ``BCELoss`` on the smoothed labels;
- each query's label is built as CompGCN's ``TrainDataset.__getitem__`` does: a NumPy zero
  vector over all entities with its answers set to 1, smoothed, then the batch stacked (the
  DataLoader's collate, here in the main process);
- GAL's adversary step re-encodes the whole graph, reverses the gradient on the rows of 128
  entities and trains the attacker MLP with the multi-label BCE, in its own Adam optimizer
  over (attacker, encoder) at ``lr * lambda``.

The modules take their weights and dropout rates from a galfast ``KGLinkPredictor`` and
``AttackerMLP`` (:func:`from_galfast`), so both sides compute the same function.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from compgcn_reference import ReferenceCompGCNConv
from torch import Tensor, nn


class GradReverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return -grad


class CompGCNConvE(nn.Module):
    """``CompGCN_ConvE`` with one CompGCN layer (the paper's configuration)."""

    def __init__(self, edge_index, edge_type, num_ent, num_rel, init_dim, dim, p):
        super().__init__()
        self.edge_index, self.edge_type, self.dim = edge_index, edge_type, dim
        self.k_w, self.k_h = p["k_w"], p["k_h"]
        self.init_embed = nn.Parameter(torch.empty(num_ent, init_dim))
        self.init_rel = nn.Parameter(torch.empty(2 * num_rel, init_dim))
        self.conv1 = ReferenceCompGCNConv(
            init_dim, dim, num_rel, p["opn"], p["gcn_drop"], torch.tanh
        )
        self.bias = nn.Parameter(torch.zeros(num_ent))
        self.bn0 = nn.BatchNorm2d(1)
        self.bn1 = nn.BatchNorm2d(p["num_filt"])
        self.bn2 = nn.BatchNorm1d(dim)
        self.hidden_drop = nn.Dropout(p["hid_drop"])
        self.hidden_drop2 = nn.Dropout(p["hid_drop2"])
        self.feature_drop = nn.Dropout(p["feat_drop"])
        self.m_conv1 = nn.Conv2d(1, p["num_filt"], p["ker_sz"], bias=False)
        flat_h, flat_w = 2 * self.k_w - p["ker_sz"] + 1, self.k_h - p["ker_sz"] + 1
        self.flat_sz = flat_h * flat_w * p["num_filt"]
        self.fc = nn.Linear(self.flat_sz, dim)

    def forward_base(self):
        x, r = self.conv1(self.init_embed, self.edge_index, self.edge_type, self.init_rel)
        return self.hidden_drop(x), r

    def concat(self, e1_embed, rel_embed):
        e1_embed = e1_embed.view(-1, 1, self.dim)
        rel_embed = rel_embed.view(-1, 1, self.dim)
        stack_inp = torch.cat([e1_embed, rel_embed], 1)
        return torch.transpose(stack_inp, 2, 1).reshape((-1, 1, 2 * self.k_w, self.k_h))

    def logits(self, sub, rel):
        all_ent, all_rel = self.forward_base()
        sub_emb, rel_emb = torch.index_select(all_ent, 0, sub), torch.index_select(all_rel, 0, rel)
        x = self.bn0(self.concat(sub_emb, rel_emb))
        x = self.m_conv1(x)
        x = self.feature_drop(F.relu(self.bn1(x)))
        x = self.fc(x.view(-1, self.flat_sz))
        x = F.relu(self.bn2(self.hidden_drop2(x)))
        x = torch.mm(x, all_ent.transpose(1, 0))
        x += self.bias.expand_as(x)
        return x

    def forward(self, sub, rel):
        return torch.sigmoid(self.logits(sub, rel))

    def encoder_parameters(self):
        return [self.init_embed, self.init_rel, *self.conv1.parameters()]


def get_label(answers: np.ndarray, num_ent: int, lbl_smooth: float) -> Tensor:
    """``TrainDataset.get_label`` and the smoothing of ``__getitem__``."""
    y = np.zeros([num_ent], dtype=np.float32)
    for e2 in answers:
        y[e2] = 1.0
    label = torch.FloatTensor(y)
    return (1.0 - lbl_smooth) * label + (1.0 / num_ent)


def from_galfast(model, attacker, triples: Tensor, num_rel: int):
    """(reference model, reference attacker) with the weights and dropout rates of galfast's
    ``KGLinkPredictor`` (CompGCN encoder, one layer, ConvE decoder) and ``AttackerMLP``."""
    enc, dec = model.encoder, model.decoder
    conv = enc.convs[0]
    p = {
        "k_w": dec.k_w,
        "k_h": dec.k_h,
        "opn": conv.composition,
        "gcn_drop": conv.drop.p,
        "hid_drop": enc.drop.p,
        "hid_drop2": dec.hidden_dropout.p,
        "feat_drop": dec.feature_dropout.p,
        "num_filt": dec.conv.out_channels,
        "ker_sz": dec.conv.kernel_size[0],
    }
    # CompGCN's loader: the triples, then their inverses with relation r + R.
    edge_index = triples[:, [0, 2]].t()
    both = torch.cat([edge_index, edge_index.flip(0)], 1)
    types = torch.cat([triples[:, 1], triples[:, 1] + num_rel])
    ref = CompGCNConvE(
        both, types, enc.num_entities, num_rel, enc.entity.size(1), conv.out_channels, p
    )
    with torch.no_grad():
        ref.init_embed.copy_(enc.entity)
        ref.init_rel.copy_(enc.relation)
        ref.conv1.load_state_dict(
            {k: v for k, v in conv.state_dict().items() if not k.startswith("bias")}
        )
        ref.bias.copy_(dec.bias)
        ref.bn0.load_state_dict(dec.input_norm.state_dict())
        ref.m_conv1.load_state_dict(dec.conv.state_dict())
        ref.bn1.load_state_dict(dec.conv_norm.state_dict())
        ref.fc.load_state_dict(dec.fc.state_dict())
        ref.bn2.load_state_dict(dec.hidden_norm.state_dict())
    ref_attacker = nn.Sequential(*[_copy_layer(layer) for layer in attacker.net])
    return ref, ref_attacker


def _copy_layer(layer: nn.Module) -> nn.Module:
    if isinstance(layer, nn.Linear):
        copy = nn.Linear(layer.in_features, layer.out_features)
        copy.load_state_dict(layer.state_dict())
        return copy
    if isinstance(layer, nn.LeakyReLU):
        return nn.LeakyReLU(layer.negative_slope)
    raise ValueError(f"unexpected attacker layer {layer}")


class ReferenceGAL:
    """GAL's loop on CompGCN-ConvE: a task step then an adversary step per batch.
    ``from_logits``: the task loss from the logits (as galfast) instead of CompGCN's
    ``BCELoss(sigmoid(.))``, which saturates for logits above ~17 (float32 sigmoid is 1, the
    log is clamped at -100): for comparing the two models' numbers, not their speed."""

    def __init__(
        self, model: CompGCNConvE, attacker: nn.Module, lr: float, lam: float, from_logits=False
    ):
        self.model, self.attacker, self.lam, self.from_logits = model, attacker, lam, from_logits
        self.task_opt = torch.optim.Adam(model.parameters(), lr=lr)
        adv_params = [*attacker.parameters(), *model.encoder_parameters()]
        self.adv_opt = torch.optim.Adam(adv_params, lr=lr * lam)
        self.bceloss = nn.BCELoss()

    def step(self, sub, rel, answers, lbl_smooth, adv_rows, adv_targets):
        """One batch: ``answers`` the queries' answer arrays (labels built here)."""
        num_ent = self.model.init_embed.size(0)
        label = torch.stack([get_label(a, num_ent, lbl_smooth) for a in answers])
        self.model.train()
        self.attacker.train()
        if self.from_logits:
            loss = F.binary_cross_entropy_with_logits(self.model.logits(sub, rel), label)
        else:
            loss = self.bceloss(self.model(sub, rel), label)
        self.task_opt.zero_grad()
        loss.backward()
        self.task_opt.step()
        z, _ = self.model.forward_base()
        out = self.attacker(GradReverse.apply(z)[adv_rows])
        adv_loss = F.binary_cross_entropy_with_logits(out, adv_targets)
        self.adv_opt.zero_grad()
        adv_loss.backward()
        self.adv_opt.step()
        return loss.detach(), adv_loss.detach()
