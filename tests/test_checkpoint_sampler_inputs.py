"""Inputs users really pass to GALTrainer's checkpoints, NeighborLoader and the data-parallel
trainer: damaged or foreign files, checkpoints of other modules or sampling, hand-edited
entries, paths that cannot name a file, seeds edited after the loader was built, a process
group initialised after the trainer. Each gets a ValueError naming the problem (and the file),
never a bare error from deep inside, a crash or silently different training."""

from __future__ import annotations

import os
import re

import pytest
import torch
import torch.distributed as dist
from damaged_zip import flip_a_stored_bit
from gal_fixtures import MeanEncoder, planted_graph
from gloo_group import two_process_records
from graphs import random_edges
from torch import nn

from galfast import GALTrainer, Graph, SensitiveAttribute
from galfast.experiments.encoders import GNNStack
from galfast.models import AttackerMLP
from galfast.nn import SAGEConv
from galfast.ops import NeighborLoader
from galfast.train import NeighborSampling, NodeBatches, NodeHead, classification_loss

# Tiny tensors: one thread avoids oversubscribing shared 2-core machines.
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def data():
    return planted_graph(num_nodes=40, num_classes=3, degree=3, seed=1)


def _modules(data, out=4, classes=3, seed=0):
    torch.manual_seed(seed)
    encoder = MeanEncoder(data.x.size(1), 8, out)
    return encoder, NodeHead(nn.Linear(out, 2)), AttackerMLP(out, classes, hidden=(8,))


def _trainer(data, out=4, classes=3, seed=0, **kwargs):
    modules = _modules(data, out, classes, seed)
    return GALTrainer(*modules, task_loss=classification_loss, lam=0.5, **kwargs)


def _fit(trainer, data, epochs=1):
    batches = NodeBatches(data.train, data.y[data.train], batch_size=8)
    attr = SensitiveAttribute("a", "categorical", data.a)
    trainer.fit(data.graph, batches, attr, epochs=epochs, x=data.x, progress=False)
    return trainer


@pytest.fixture(scope="module")
def saved(data, tmp_path_factory):
    """A trained trainer and its checkpoint file."""
    trainer = _fit(_trainer(data), data)
    path = tmp_path_factory.mktemp("ckpt") / "good.pt"
    trainer.save_checkpoint(path)
    return trainer, path


def _resume(data, path, **kwargs):
    modules = _modules(data, kwargs.pop("out", 4), kwargs.pop("classes", 3), seed=9)
    return GALTrainer.resume(path, *modules, task_loss=classification_loss, **kwargs)


def _params(trainer):
    return [p.detach().clone() for p in trainer.encoder.parameters()]


@pytest.mark.parametrize("damage", ["truncated", "empty", "garbage", "pickled module"])
def test_an_unreadable_file_is_a_value_error_naming_it(data, saved, tmp_path, damage):
    # Was OSError "Invalid argument", EOFError, KeyError: 101 and UnpicklingError.
    path = tmp_path / "bad.pt"
    good = saved[1].read_bytes()
    if damage == "pickled module":
        torch.save(nn.Linear(2, 2), path)
    else:
        path.write_bytes(
            {"truncated": good[: len(good) // 2], "empty": b"", "garbage": b"x" * 50}[damage]
        )
    with pytest.raises(ValueError, match=f"{path} is not a"):
        _resume(data, path)
    with pytest.raises(ValueError, match=f"{path} is not a"):
        _trainer(data).load_checkpoint(path)


def test_a_flipped_bit_in_a_stored_tensor_is_refused(data, saved, tmp_path):
    # torch.load checks no CRC: the damaged weight loaded silently.
    path = tmp_path / "flipped.pt"
    entry = flip_a_stored_bit(saved[1], path)
    match = f"{path} is damaged: its entry {re.escape(entry)} fails"
    with pytest.raises(ValueError, match=match):
        _trainer(data).load_checkpoint(path)
    with pytest.raises(ValueError, match=match):
        _resume(data, path)


@pytest.mark.parametrize(
    "saved_dtype, dtype", [(torch.float64, torch.float32), (torch.float32, torch.float64)]
)
def test_a_checkpoint_of_another_precision_is_refused(data, tmp_path, saved_dtype, dtype):
    # Was loaded silently, weights and Adam moments rounded (or widened) into this trainer's
    # dtype: the resumed run was not the saved one.
    def trainer(dtype):
        modules = [module.to(dtype) for module in _modules(data)]
        return GALTrainer(*modules, task_loss=classification_loss, lam=0.5)

    path = tmp_path / "ckpt.pt"
    trainer(saved_dtype).save_checkpoint(path)
    match = rf"encoder\.\w+\.weight is {saved_dtype}, this encoder's {dtype}"
    with pytest.raises(ValueError, match=match):
        trainer(dtype).load_checkpoint(path)
    assert trainer(saved_dtype).load_checkpoint(path).epoch == 0


@pytest.mark.cuda
def test_a_cpu_checkpoint_loads_into_a_cuda_trainer(data, saved):
    # The dtype check compares dtypes only: the move to the trainer's device is no mismatch.
    trainer = _trainer(data, device="cuda").load_checkpoint(saved[1])
    for before, after in zip(saved[0].encoder.parameters(), trainer.encoder.parameters()):
        assert after.device.type == "cuda" and torch.equal(before, after.cpu())


@pytest.mark.parametrize(
    "options,match",
    [
        ({"out": 5}, r"encoder.out.weight has shape \[4, 8\], this encoder's \[5, 8\]"),
        ({"classes": 2}, r"attacker.net.2.weight has shape \[3, 8\], this attacker's \[2, 8\]"),
    ],
)
def test_modules_of_other_sizes_are_refused_before_anything_loads(data, saved, options, match):
    # Was torch's RuntimeError, raised after the encoder had been replaced.
    with pytest.raises(ValueError, match=match):
        _resume(data, saved[1], **options)
    trainer = _trainer(data, **options)
    before = _params(trainer)
    with pytest.raises(ValueError, match=match):
        trainer.load_checkpoint(saved[1])
    assert all(torch.equal(a, b) for a, b in zip(before, _params(trainer)))


def test_one_attacker_per_attribute_does_not_load_a_single_attackers_checkpoint(data, saved):
    encoder, head, _ = _modules(data)
    attackers = {"a": AttackerMLP(4, 3, hidden=(8,)), "b": AttackerMLP(4, 2)}
    with pytest.raises(ValueError, match="checkpoint's attacker does not fit this attacker"):
        GALTrainer.resume(saved[1], encoder, head, attackers, task_loss=classification_loss)


def _edited(saved, tmp_path, edit):
    state = saved[0].state_dict()
    edit(state)
    path = tmp_path / "edited.pt"
    torch.save(state, path)
    return path


def _nan_weight(state):
    state["encoder"] = {k: v.clone() for k, v in state["encoder"].items()}
    next(iter(state["encoder"].values()))[0] = float("nan")


def _short_moment(state):
    entries = state["task_optimizer"]["state"]
    first = next(iter(entries))
    entries[first] = {**entries[first], "exp_avg": torch.zeros(3)}


@pytest.mark.parametrize(
    "edit,match",
    [
        # Loaded silently; the NaN showed only as a diverged loss blaming the features.
        (_nan_weight, r"encoder\.\w+\.weight holds NaN"),
        # Loaded silently; the fused Adam step then corrupted the heap (malloc abort).
        (_short_moment, r"task_optimizer holds exp_avg of shape \[3\]"),
        # AttributeError: 'NoneType' object has no attribute 'copy'.
        (lambda s: s.update(adversary_optimizer=None), "adversary_optimizer is not an optimizer"),
        # TypeError: Expected state_dict to be dict-like.
        (lambda s: s.update(task_head=None), "task_head is a NoneType, not a state dict"),
        # ValueError: invalid literal for int() with base 10: 'two'; -3 loaded as the epoch.
        (lambda s: s.update(epoch="two"), "epoch must be an int >= 0, got 'two'"),
        (lambda s: s.update(step=-3), "step must be an int >= 0, got -3"),
        # ValueError: dictionary update sequence element #0 has length 1; 2 is required.
        (lambda s: s.update(history="epochs"), "history must be a list of dicts"),
        # A newer galfast's setting was dropped and the run continued without it.
        (lambda s: s["config"].update(new_setting=1), r"does not know \(new_setting\)"),
    ],
)
def test_hand_edited_entries_are_named_with_the_file(data, saved, tmp_path, edit, match):
    path = _edited(saved, tmp_path, edit)
    with pytest.raises(ValueError, match=match) as refused:
        _trainer(data).load_checkpoint(path)
    assert str(path) in str(refused.value)
    with pytest.raises(ValueError, match=match):
        _resume(data, path)


def _sampled(data, fanouts, seed=0):
    torch.manual_seed(seed)
    encoder = GNNStack([SAGEConv(data.x.size(1), 8), SAGEConv(8, 4)])
    sampler = None if fanouts is None else NeighborSampling(fanouts)
    modules = (encoder, NodeHead(nn.Linear(4, 2)), AttackerMLP(4, 3))
    return modules, sampler


def test_resuming_with_other_sampling_is_refused(data, tmp_path):
    # The sampler was not recorded: a sampled run resumed on the whole graph, or with other
    # fan-outs, without a word.
    modules, sampler = _sampled(data, [3, 2])
    trainer = GALTrainer(*modules, task_loss=classification_loss, lam=0.5, sampler=sampler)
    _fit(trainer, data)
    trainer.save_checkpoint(tmp_path / "sampled.pt")
    for fanouts in (None, [5, 5]):
        modules, sampler = _sampled(data, fanouts, seed=1)
        with pytest.raises(ValueError, match=r"sampler: saved \{'fanouts': \[3, 2\]"):
            GALTrainer.resume(
                tmp_path / "sampled.pt", *modules, task_loss=classification_loss, sampler=sampler
            )
    modules, _ = _sampled(data, None, seed=1)
    same = NeighborSampling([3, 2], embed_chunk_size=7)  # the chunk size changes no step
    resumed = GALTrainer.resume(
        tmp_path / "sampled.pt", *modules, task_loss=classification_loss, sampler=same
    )
    assert resumed.epoch == 1


def test_a_path_that_cannot_name_a_file_is_refused_before_writing(data, saved, tmp_path):
    trainer = saved[0]
    # Was IsADirectoryError from os.replace, leaving "<folder>.tmp" behind.
    (tmp_path / "runs").mkdir()
    with pytest.raises(ValueError, match="is a folder: name a file"):
        trainer.save_checkpoint(tmp_path / "runs")
    assert sorted(os.listdir(tmp_path)) == ["runs"]
    # Was FileExistsError from makedirs.
    (tmp_path / "notes").write_text("x")
    with pytest.raises(ValueError, match="notes is a file, not a folder"):
        trainer.save_checkpoint(tmp_path / "notes" / "c.pt")
    # Was RuntimeError "[enforce fail at inline_container.cc] invalid file name: .tmp".
    with pytest.raises(ValueError, match="is empty: name a file"):
        trainer.save_checkpoint("")


def _loader_graph() -> Graph:
    return Graph.from_edge_index(random_edges(20, 60, seed=2), 20)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_seeds_edited_after_the_loader_was_built_are_refused(dtype):
    # An int64 CPU tensor was kept as given: an edit after the checks changed the seeds
    # silently (an int32 one was copied, so the same edit was ignored).
    nodes = torch.arange(8, dtype=dtype)
    loader = NeighborLoader(_loader_graph(), nodes, [2], 4, seed=0)
    nodes[0] = 15  # a seed the loader never checked, trained on silently
    with pytest.raises(ValueError, match="NeighborLoader.nodes was modified in place"):
        list(loader.epoch(0))


@pytest.mark.parametrize(
    "options,match",
    [
        # TypeError: 'int' object is not iterable, at the first batch.
        ({"fanouts": 3}, "fanouts must be a sequence of ints, got int"),
        # Accepted, and "no" shuffled.
        ({"shuffle": "no"}, "shuffle must be a bool, got str"),
        ({"drop_last": 1}, "drop_last must be a bool, got int"),
    ],
)
def test_loader_options_are_checked_when_it_is_built(options, match):
    args = {"fanouts": [2], **options}
    with pytest.raises(ValueError, match=match):
        NeighborLoader(_loader_graph(), None, args.pop("fanouts"), 4, seed=0, **args)


def _two_process_worker(rank: int, world_size: int, workdir: str) -> None:
    """Builds a trainer before joining the group (a common ordering mistake), then one after
    it, whose checkpoint goes to a folder; records what each process saw."""
    from distributed_gal import trainer_and_data

    torch.set_num_threads(1)
    early, (graph, batches, attr), x = trainer_and_data()
    init = f"file://{os.path.join(workdir, 'rendezvous')}"
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world_size)
    seen = {}
    try:
        try:
            early.fit(graph, batches, attr, epochs=1, x=x, progress=False)
            seen["late group"] = "trained"
        except ValueError as error:
            seen["late group"] = str(error)
        trainer, *_ = trainer_and_data()
        try:
            trainer.save_checkpoint(workdir)
            seen["save"] = "saved"
        except (ValueError, OSError) as error:
            seen["save"] = f"{type(error).__name__}: {error}"
        dist.barrier()
    finally:
        dist.destroy_process_group()
    torch.save(seen, os.path.join(workdir, f"rank{rank}.pt"))


def test_two_processes_refuse_a_late_group_and_share_a_failed_save(tmp_path):
    # A trainer built before init_distributed trained alone in each process, each one
    # writing the checkpoint; a save that failed on rank 0 returned normally on rank 1.
    seen = two_process_records(_two_process_worker, str(tmp_path))
    for rank, record in enumerate(seen):
        assert (
            f"built as process 0 of 1 but torch.distributed now has this process as {rank} of 2"
            in record["late group"]
        )
    assert (
        seen[0]["save"].startswith("ValueError: checkpoint path")
        and "is a folder" in seen[0]["save"]
    )
    assert seen[1]["save"] == f"OSError: rank 0 could not write the checkpoint {tmp_path}"
