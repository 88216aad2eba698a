"""A process that failed before it had fingerprints still joins the check of a fit's start
on the trainer's device: NCCL reduces no CPU tensor, so a CPU default there would fail that
process with NCCL's error while the others waited for it (no second process needed: the
collective is replaced by one that records its tensor's device)."""

from __future__ import annotations

import pytest
import torch

from galfast.train import distributed
from galfast.train.distributed import ProcessGroup


class _Reduced(Exception):
    """Stops the exchange once its all_reduce was called (its result would be on meta)."""


def test_a_failed_process_exchanges_on_the_given_device(monkeypatch):
    devices = []

    def all_reduce(tensor, *args, **kwargs):
        devices.append(tensor.device)
        raise _Reduced

    monkeypatch.setattr(distributed.dist, "all_reduce", all_reduce)
    with pytest.raises(_Reduced):
        ProcessGroup(1, 2).differing(
            {}, "fit (its start)", failed=True, device=torch.device("meta")
        )
    assert devices == [torch.device("meta")]
