"""The trainer's steps on sampled mini-batches, one process's share of each batch at a time.

Mixed into :class:`~galfast.train.GALTrainer` (which provides the modules, optimizers,
settings, ``process_group`` and the ``SampledEncoder`` of the current fit). With one process
the share is the whole batch and every scale below is 1.
"""

from __future__ import annotations

from typing import Any, Optional

import torch
from torch import Tensor

from galfast.gal.adversary_losses import adversary_loss, check_outputs
from galfast.nn.grad_reverse import grad_reverse
from galfast.train.sampled_batches import batch_length, batch_nodes, localised, shard
from galfast.train.sampled_encoding import ADVERSARY, TASK

__all__ = ["SampledSteps"]


def _parameters(*optimizers) -> list:
    return [
        p for opt in optimizers if opt is not None for g in opt.param_groups for p in g["params"]
    ]


class SampledSteps:
    """Task, adversary and joint steps that encode sampled computation graphs."""

    def _task_share(self, batch: Any) -> tuple[Any, float]:
        """This process's items of ``batch`` and their fraction of it."""
        total = batch_length(batch)
        start, stop = self.process_group.share(total)
        mine = shard(batch, start, stop) if self.process_group.enabled else batch
        return mine, ((stop - start) / total if total else 0.0)

    def _sampled_task_step(self, batch: Any) -> Tensor:
        """One task optimizer step; returns this process's share of the batch's loss."""
        group = self.process_group
        mine, part = self._task_share(batch)
        self.task_optimizer.zero_grad()
        z, rows = self._sampled.encode(self.encoder, batch_nodes(mine), self.step, TASK)
        share = torch.zeros((), device=self.device)
        if z is not None:
            local = localised(mine, rows)
            loss = self.task_loss(self.task_head(z, local), local)
            # Scaled so that the processes' mean gradient is the whole batch's.
            (loss * (part * group.world_size)).backward()
            share = loss.detach() * part
        group.average_gradients(_parameters(self.task_optimizer))
        self.task_optimizer.step()
        return share

    def _sampled_adversary_step(
        self, batch: Any, adversaries, picked, *, joint: bool
    ) -> tuple[Optional[Tensor], dict[str, Tensor]]:
        """An adversary step (``joint``: with the task loss, one encoding and one backward) on
        ``picked``, the whole adversary batch ``[(partners, targets)]`` per attribute, of
        which this process encodes its share. Returns (task loss share or None, the shares of
        the adversaries' losses by attribute name)."""
        group = self.process_group
        counts = [rows.numel() for rows, _ in picked]
        mine = []
        for (rows, targets), count in zip(picked, counts):
            start, stop = group.share(count)
            mine.append((rows[start:stop], targets[start:stop]))
        node_lists = [rows for rows, _ in mine]
        task_batch = part = None
        if joint:
            task_batch, part = self._task_share(batch)
            node_lists.insert(0, batch_nodes(task_batch))
        nodes = torch.cat(node_lists)
        z, rows = self._sampled.encode(self.encoder, nodes, self.step, TASK if joint else ADVERSARY)
        row_lists = list(torch.split(rows, [n.numel() for n in node_lists]))
        objective, task_share = None, None
        if joint:
            task_rows = row_lists.pop(0)
            task_share = torch.zeros((), device=self.device)
            if task_rows.numel():
                local = localised(task_batch, task_rows)
                loss = self.task_loss(self.task_head(z, local), local)
                objective = loss * (part * group.world_size)
                task_share = loss.detach() * part
        z_rev = None if z is None else grad_reverse(z, self.settings.lam if joint else 1.0)
        losses = {}
        for adversary, (_, targets), count, z_rows in zip(adversaries, mine, counts, row_lists):
            if count == 0:
                continue
            attr = adversary.attribute
            if z_rows.numel() == 0:
                losses[attr.name] = torch.zeros((), device=self.device)
                continue
            outputs = adversary.attacker(z_rev[z_rows])
            check_outputs(attr.name, attr.kind, outputs, targets, attr.num_outputs)
            # The attribute checked its values when built: no device wait per step.
            loss = adversary_loss(
                outputs, targets, attr.kind, self.settings.distance, check_targets=False
            )
            part_rows = z_rows.numel() / count
            losses[attr.name] = loss.detach() * part_rows
            term = loss * (part_rows * group.world_size)
            objective = term if objective is None else objective + term
        if not joint and not any(counts):
            return None, losses
        optimizers = (
            (self.task_optimizer, self.adversary_optimizer)
            if joint
            else (self.adversary_optimizer,)
        )
        for optimizer in optimizers:
            optimizer.zero_grad()
        if objective is not None:
            objective.backward()
        group.average_gradients(_parameters(*optimizers))
        for optimizer in optimizers:
            optimizer.step()
        self._clip_critics(adversaries)
        return task_share, losses
