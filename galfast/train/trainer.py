"""GALTrainer: the GAL minimax (paper.md, "Objective" and "Training", Algorithm 1)."""

from __future__ import annotations

import math
import os
import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

import torch
from torch import Tensor, nn

from galfast._args import check_device, check_flag
from galfast.gal.adversary_losses import adversary_loss, check_outputs, clip_weights
from galfast.gal.pairing import PairingSpec, pair_nodes
from galfast.gal.seeding import (
    cuda_rng_devices,
    derive_seed,
    seeded_generator,
    seeded_globals,
)
from galfast.gal.sensitive import KnownValues, SensitiveAttribute, as_attribute_list
from galfast.graph import Graph
from galfast.nn.grad_reverse import grad_reverse
from galfast.train.callbacks import Callback, History
from galfast.train.checkpoints import (
    CHECKPOINT_FORMAT,
    check_checkpoint,
    check_module_state,
    check_optimizer_state,
    load_module_state,
    module_state,
    read_checkpoint,
    write_checkpoint,
)
from galfast.train.config import GALConfig, check_number
from galfast.train.distributed import ProcessGroup, batch_values, fingerprint
from galfast.train.encoding import move_to_device, node_inputs, to_device_without_waiting
from galfast.train.layerwise import layerwise_embed, supports_layerwise
from galfast.train.optimizers import (
    OptimizerSpec,
    make_capturable,
    make_optimizer,
    unique_parameters,
)
from galfast.train.progress import EpochProgress, batches_per_epoch
from galfast.train.sampled_encoding import SampledEncoder
from galfast.train.sampled_steps import SampledSteps
from galfast.train.sampling import NeighborSampling
from galfast.train.step_graphs import StepGraphs

__all__ = ["GALTrainer", "LossDiverged"]

AttackerSpec = Union[nn.Module, Mapping[str, nn.Module], None]
SensitiveSpec = Union[SensitiveAttribute, Sequence[SensitiveAttribute], None]


class LossDiverged(ValueError):
    """A loss of :meth:`GALTrainer.fit` became NaN or infinite: training diverged (``lam`` or
    ``lr`` too large) or a feature, a target or the encoder's output holds NaN. Checked once
    per epoch, so the epoch's later steps ran on; the trainer's state is unusable.

    Attributes:
        loss: which loss (``"task loss"``, ``"adversary loss of 'gender'"``).
        epoch: the epoch, counted from 1.
        step: the first of the epoch's steps of that loss (from 1) whose value was not
            finite; None when each was finite but their mean overflowed.
        value: that step's value (or the mean).
    """

    def __init__(self, loss: str, epoch: int, steps: list[float], mean: float) -> None:
        bad = [i for i, v in enumerate(steps) if not math.isfinite(v)]
        self.loss, self.epoch = loss, epoch
        self.step = bad[0] + 1 if bad else None
        self.value = steps[bad[0]] if bad else mean
        where = f"epoch {epoch}" if self.step is None else f"epoch {epoch} step {self.step}"
        super().__init__(
            f"{loss} became {self.value} at {where} (of {len(steps)} that epoch): "
            "training diverged; try a smaller lam or lr, and check the features, the targets "
            "and the encoder's output for NaN"
        )


@dataclass(frozen=True, eq=False)
class _Adversary:
    """One sensitive attribute with its known values and its attacker."""

    attribute: SensitiveAttribute
    known: KnownValues
    attacker: nn.Module


def _warn_rerun(epoch: int, steps: int) -> None:
    warnings.warn(
        f"the last fit stopped inside epoch {epoch + 1}, after {steps} of its steps: this fit "
        "runs that epoch again from its first batch on modules that already hold those steps, "
        "so the run is no longer the uninterrupted one (load_checkpoint() a saved epoch to "
        "continue exactly)",
        UserWarning,
        stacklevel=3,
    )


def _callback_list(callbacks: Any) -> list[Callback]:
    """``callbacks`` as a list, read once: a generator would be used up by the check and no
    callback would run. One Callback alone is a list of one, None a list of none."""
    if callbacks is None:
        return []
    if isinstance(callbacks, Callback):
        return [callbacks]
    if isinstance(callbacks, (str, bytes)) or not hasattr(callbacks, "__iter__"):
        raise ValueError(
            f"callbacks must be a sequence of Callback instances, got {type(callbacks).__name__}"
        )
    callbacks = list(callbacks)
    for cb in callbacks:
        if not isinstance(cb, Callback):
            raise ValueError(f"callbacks must be Callback instances, got {type(cb).__name__}")
    return callbacks


def _callbacks_failure(callbacks: list[Callback], hook: str, *args: Any) -> Optional[Exception]:
    """Calls each callback's ``hook`` (a method name) with ``args`` in turn; the exception one
    raises (the rest then do not run), returned for the next exchange to raise in every
    process."""
    try:
        for cb in callbacks:
            getattr(cb, hook)(*args)
    except Exception as error:
        return error
    return None


def _item_count(graph: Optional[Graph], task_batches: Any) -> Optional[int]:
    """What a sensitive attribute's rows stand for: the graph's nodes, or with graph-level
    batches (no graph) their graphs, which an attribute of another length does not fit."""
    if graph is not None:
        return graph.num_nodes
    graphs = getattr(task_batches, "graphs", None)
    return len(graphs) if graphs is not None and hasattr(graphs, "__len__") else None


def _node_embeddings(z: Any, graph: Graph) -> Tensor:
    """The encoder's output ``z``, refused unless it holds one row per node of ``graph``."""
    if not isinstance(z, Tensor) or z.dim() != 2 or z.size(0) != graph.num_nodes:
        shape = list(z.shape) if isinstance(z, Tensor) else type(z).__name__
        raise ValueError(
            f"the encoder must return [num_nodes={graph.num_nodes}, D] embeddings, got {shape}"
        )
    return z


def _warn_single_class(name: str, targets: Tensor) -> None:
    """One class among the known nodes: the adversary's loss has nothing to separate, so GAL
    hides nothing (a filter that kept one group, or labels that all read the same?)."""
    if targets.numel() and torch.unique(targets).numel() < 2:
        warnings.warn(
            f"sensitive attribute {name!r} has a single class among its "
            f"{targets.numel()} known nodes: its adversary can learn nothing to hide",
            RuntimeWarning,
            stacklevel=4,
        )


def _warn_unpaired(name: str, failures: int, epoch: int) -> None:
    """Every walk failed: the adversary of ``name`` saw no pair, so the epoch trained the task
    alone (isolated nodes, or more hops than the graph's paths from the attribute's nodes)."""
    warnings.warn(
        f"epoch {epoch}: all {failures} pairing walks of attribute {name!r} failed, so its "
        "adversary trained on nothing (isolated nodes, or more hops than the graph has paths?)",
        RuntimeWarning,
        stacklevel=3,
    )


def _flat(values: Sequence[Any]) -> list[Any]:
    """``values`` with nested lists spliced in place."""
    flat = []
    for value in values:
        flat.extend(_flat(value) if isinstance(value, list) else [value])
    return flat


def _optimizer_tensors(optimizer: Optional[torch.optim.Optimizer]) -> list[Any]:
    """An optimizer's per-parameter state in order (None: no optimizer)."""
    if optimizer is None:
        return [None]
    state = optimizer.state_dict()["state"]
    return [value for index in sorted(state) for value in state[index].values()]


def _state_shapes(module: Any) -> list[Any]:
    """A module's parameter and buffer names with their shapes and dtypes (None: no module)."""
    if not isinstance(module, nn.Module):
        return [None]
    return [
        (name, "lazy" if nn.parameter.is_lazy(t) else tuple(t.shape), str(t.dtype))
        if isinstance(t, Tensor)
        else (name, type(t).__name__)
        for name, t in module.state_dict().items()
    ]


def _batches_values(task_batches: Any) -> list[Any]:
    """What identifies a batch iterable across processes: its type, its length where it has
    one, and its tensor and plain attributes (``NodeBatches``' nodes and targets, ...).
    Other objects are left out: their repr may hold an address, which differs between
    processes."""
    length = len(task_batches) if hasattr(task_batches, "__len__") else None
    fields = vars(task_batches) if hasattr(task_batches, "__dict__") else {}
    plain = (Tensor, bool, int, float, str, type(None))
    values = [value for _, value in sorted(fields.items()) if isinstance(value, plain)]
    return [type(task_batches).__name__, length, *values]


class GALTrainer(SampledSteps):
    r"""Trains an encoder whose embeddings serve a task while hiding sensitive attributes.

    The GAL objective (TV form; the Wasserstein form replaces the adversary's loss by the
    dual critic gap, see :func:`~galfast.train.wasserstein_gap`):

    .. math::
        \min_{g,h} \max_f \; \varepsilon_Y(h(g(X))) - \lambda\, \varepsilon_A(f(g(X)))

    Each step encodes the whole graph, ``z = encoder(inputs, graph)`` (protocol in
    :mod:`galfast.train.encoding`). A *task step* minimises ``task_loss(task_head(z, batch),
    batch)`` with the task optimizer over (encoder, head). An *adversary step* re-encodes,
    feeds ``GradReverse(z)`` (rows picked by the pairing) to each attribute's attacker and
    minimises the summed adversary loss with the adversary optimizer over (attackers,
    encoder), whose learning rate is ``lr * lam``: the attackers descend while the reversed
    gradient makes the encoder ascend. ``lam = 0`` builds no adversary optimizer and never
    runs an adversary step.

    Scheduling the two steps (``adv_every = n``):

    - ``adv_schedule="after"`` (default): every batch gives a task step, and an adversary step
      follows every n-th one. ``adv_every=1`` is the reference MovieLens runs (an adversary
      step after each task step).
    - ``adv_schedule="instead"``: every n-th batch is used for an adversary step instead of a
      task step (Algorithm 1 with :math:`n_a = n`; needs ``n >= 2``).

    Batches are counted from the start of training (pre-training included). The first
    ``pretrain_epochs`` epochs are task-only.

    How the encoder takes the adversary's gradient (``adv_update``):

    - ``"separate"`` (default, the paper): the adversary optimizer holds the attackers *and
      the encoder* at learning rate ``lr * lam``, with its own Adam state. Adam normalises
      each optimizer's steps, so the encoder moves ``lam`` times as far per step against the
      attacker as for the task, whatever the two gradients' sizes; at large ``lam`` (4 on
      MovieLens) the reversed gradient grows the embeddings' scale without bound, the task
      collapses and the embedding ends up encoding the attribute *reversed*, which a fresh
      attacker reads (docs/results.md, "TV at large lambda").
    - ``"joint"``: the gradient-reversal form of Ganin & Lempitsky: on an adversary step the
      encoder follows the gradient of ``task loss - lam * adversary loss`` in the task
      optimizer (one encoding, one backward, ``lam`` scaling the reversed gradient instead
      of a learning rate), and the adversary optimizer holds the attackers only, at ``lr``.
      With plain SGD the two forms agree to first order in ``lr``; with Adam the joint form
      keeps the task's and the adversary's gradients in one normalisation, so a task loss
      that starts to blow up outweighs the adversary and the embeddings stay small (their
      scale still drifts up slowly at ``lam`` 4). The adversary reads the embeddings before
      the step's update instead of after. Needs ``adv_schedule="after"``.

    Args:
        encoder: ``encoder(inputs, graph) -> z [num_nodes, D]`` (or see ``GraphBatch``).
        task_head: ``task_head(z, batch) -> pred``; an ``nn.Module`` (trained) or a plain
            callable. Ready-made: ``NodeHead``, ``EdgeHead``, ``GraphHead``.
        attacker: the simulated adversary ``f``: one module (one sensitive attribute) or a
            mapping ``{attribute name: module}`` (one adversary per attribute). Outputs per
            attribute kind: binary 1 logit (or 2 scores), categorical C scores, multilabel L
            logits, continuous D values. May be None only when ``lam == 0``.
        task_loss: ``task_loss(pred, batch) -> scalar``. Ready-made: ``link_loss``,
            ``rating_cross_entropy``, ``classification_loss``, ...
        distance: ``"tv"`` (cross-entropy / MSE adversary) or ``"wasserstein"`` (dual critic on
            class-conditional means, attacker weights clipped to ``[-clip, clip]`` after each
            adversary step; discrete attributes only).
        lam: the trade-off :math:`\lambda \ge 0`; scales the adversary's learning rate.
        pairing: ``"node"``, ``"neighbor"``, ``("nhop", n)`` or ``"nhop:n"``: the attacker
            predicts :math:`A_v` from the embedding of v, of a random neighbour, or of an
            n-hop walk end (:func:`galfast.ops.sample_nhop`, fresh randomness every step;
            failed walks are dropped and counted in the history).
        adv_every, adv_schedule, adv_update: see above.
        adv_batch_size: nodes per adversary step, drawn afresh among those where the
            attribute is known (None = all of them; the MovieLens runs used 256 users).
        pretrain_epochs: task-only epochs at the start.
        lr: task learning rate; the adversary's is ``lr * lam``.
        clip: Wasserstein critic weight bound ``c`` (unused for ``"tv"``).
        seed: an int in ``[0, 2**64)``; every random draw of the run is keyed by (seed, epoch,
            step): the trainer's own draws (adversary batches, walks) by step, and whatever the
            batches and modules draw from torch's, NumPy's or Python's global generators
            (shuffles, negatives, dropout) by epoch, as these are seeded at the start of every
            epoch (the caller's states are restored after). Runs are reproducible and resumes
            exact without saving generator states.
        optimizer: ``"adam"`` (default), ``"adamw"``, ``"sgd"``, ``"rmsprop"`` or a factory
            ``(params, lr=...) -> torch.optim.Optimizer``, used for both optimizers.
        walk_mode: ``sample_nhop``'s mode for neighbour / n-hop pairing: ``"paper"`` (the
            appendix algorithm: a walk may come back to its start, e.g. through a self loop),
            ``"simple"`` (never returns to the start) or ``"exact"`` (ends at distance n).
        device: where to train (default: the encoder's device). Modules are moved there.
        cuda_graphs: on a CUDA device, record each kind of step (task; adversary with
            ``"node"`` pairing) in a CUDA graph after two eager runs and replay it, which
            removes the host's cost of launching its kernels one by one
            (:class:`~galfast.train.step_graphs.StepGraphs`). The steps taken are the same as
            without. Needs modules whose forward and backward never synchronise with the host,
            batches made of tensors (tuples, dicts, dataclasses), and optimizers that support
            ``capturable`` (the built-in names do; SGD needs none). Steps with a new batch
            shape are captured too; walk pairings and self-encoding batches run eagerly.
        sampler: a :class:`~galfast.train.NeighborSampling` to train from neighbour-sampled
            mini-batches: each step encodes only the sampled computation graphs of the nodes
            its batch reads (the encoder is called on blocks, see NeighborSampling), and
            ``embed()`` runs layer by layer in chunks. None (default): every step encodes the
            whole graph.

    Under ``torchrun`` (an initialised ``torch.distributed`` process group, see
    :mod:`galfast.train.distributed`) a sampled trainer is data-parallel: each process trains
    on its share of every batch, gradients are averaged, checkpoints are written by rank 0.

    Example:
        >>> trainer = GALTrainer(encoder, EdgeHead(decoder), AttackerMLP(20, out_dim=1),
        ...                      task_loss=rating_cross_entropy, lam=0.5)  # doctest: +SKIP
        >>> history = trainer.fit(graph, RatingBatches(edges, ratings), gender,
        ...                       epochs=25)  # doctest: +SKIP
        >>> z = trainer.embed()  # doctest: +SKIP
    """

    def __init__(
        self,
        encoder: nn.Module,
        task_head: Callable[[Tensor, Any], Tensor],
        attacker: AttackerSpec = None,
        *,
        task_loss: Callable[[Any, Any], Tensor],
        distance: str = "tv",
        lam: float = 0.5,
        pairing: PairingSpec = "node",
        adv_every: int = 1,
        adv_schedule: str = "after",
        adv_batch_size: Optional[int] = None,
        pretrain_epochs: int = 0,
        lr: float = 0.01,
        clip: float = 1.0,
        seed: int = 0,
        optimizer: OptimizerSpec = "adam",
        walk_mode: str = "paper",
        adv_update: str = "separate",
        device: Optional[Union[str, torch.device]] = None,
        cuda_graphs: bool = False,
        sampler: Optional[NeighborSampling] = None,
    ) -> None:
        if not isinstance(encoder, nn.Module):
            raise ValueError(f"encoder must be a torch.nn.Module, got {type(encoder).__name__}")
        if not callable(task_head) or not callable(task_loss):
            raise ValueError("task_head and task_loss must be callables")
        cuda_graphs = check_flag("cuda_graphs", cuda_graphs)  # "no" is truthy
        settings = GALConfig(
            distance=distance,
            lam=lam,
            pairing=pairing,
            adv_every=adv_every,
            adv_schedule=adv_schedule,
            adv_batch_size=adv_batch_size,
            pretrain_epochs=pretrain_epochs,
            lr=lr,
            clip=clip,
            seed=seed,
            optimizer=optimizer,
            walk_mode=walk_mode,
            adv_update=adv_update,
        )
        if sampler is not None and not isinstance(sampler, NeighborSampling):
            raise ValueError(
                f"sampler must be a galfast.train.NeighborSampling, got {type(sampler).__name__}"
            )
        if sampler is not None and cuda_graphs:
            raise ValueError("cuda_graphs=True needs fixed shapes; sampled batches vary in size")
        group = ProcessGroup.detect()
        if group.enabled and sampler is None:
            raise ValueError(
                "multi-process training (torch.distributed is initialised with "
                f"{group.world_size} processes) needs sampler=NeighborSampling(...): each "
                "process samples its share of every batch"
            )
        if group.enabled and settings.distance == "wasserstein":
            raise ValueError(
                "multi-process training supports distance='tv' (the Wasserstein critic's loss "
                "over class-conditional means does not split into per-process shares)"
            )
        if settings.lam > 0 and attacker is None:
            raise ValueError("lam > 0 needs an attacker (the simulated adversary)")
        if attacker is not None and not isinstance(attacker, (nn.Module, Mapping)):
            raise ValueError(
                "attacker must be an nn.Module or a mapping {attribute name: "
                f"nn.Module}}, got {type(attacker).__name__}"
            )
        if isinstance(attacker, Mapping) and not isinstance(attacker, nn.ModuleDict):
            attacker = nn.ModuleDict(dict(attacker))

        self.device = check_device(device) if device is not None else self._module_device(encoder)
        if self.device.type == "cuda" and self.device.index is None:
            # One spelling of the device, so graph.to(self.device) keeps the same Graph object.
            self.device = torch.device("cuda", torch.cuda.current_device())
        if cuda_graphs and self.device.type != "cuda":
            raise ValueError(f"cuda_graphs=True needs a CUDA device, not {self.device}")
        self.encoder = encoder.to(self.device)
        self.task_head = (
            task_head.to(self.device) if isinstance(task_head, nn.Module) else task_head
        )
        self.attacker = None if attacker is None else attacker.to(self.device)
        self.task_loss = task_loss
        self.settings = settings
        self.sampler = sampler
        self.process_group = group

        params = unique_parameters(encoder, task_head)
        task_ids = {id(p) for p in params}
        self.task_optimizer = make_optimizer(settings.optimizer, params, settings.lr)
        self.adversary_optimizer = None
        if settings.lam > 0 and settings.adv_update == "joint":
            # The encoder takes the reversed gradient through the task optimizer.
            params = [p for p in unique_parameters(self.attacker) if id(p) not in task_ids]
            self.adversary_optimizer = make_optimizer(settings.optimizer, params, settings.lr)
        elif settings.lam > 0:
            params = unique_parameters(self.attacker, encoder)
            adversary_lr = settings.lr * settings.lam
            self.adversary_optimizer = make_optimizer(settings.optimizer, params, adversary_lr)
        self._step_graphs = StepGraphs(self.device) if cuda_graphs else None
        self._make_capturable()

        self.epoch = 0  # completed epochs
        self.step = 0  # batches seen
        self.history = History()
        self.stop_training = False
        self._graph: Optional[Graph] = None
        self._x: Optional[Tensor] = None
        self._context: tuple = ()
        self._sampled: Optional[SampledEncoder] = None
        self._saves: dict[str, int] = {}  # checkpoints saved per place (see save_checkpoint)
        # (epoch, steps into it) where an exception stopped a fit inside an epoch: the modules
        # and optimizers then hold part of that epoch, which no checkpoint can resume exactly.
        self._stopped_inside: Optional[tuple[int, int]] = None
        # Optimizer steps taken (a hook on each optimizer): a step that failed after updating
        # the modules has not counted itself in self.step yet.
        self._updates = 0
        for optimizer in (self.task_optimizer, self.adversary_optimizer):
            if optimizer is not None:
                optimizer.register_step_pre_hook(self._count_update)

    def _check_process_group(self) -> None:
        """The trainer splits batches and writes checkpoints for the process group it was built
        in: one initialised later (or ended) would leave every process training alone."""
        now = ProcessGroup.detect()
        if not now.same_as(self.process_group):
            raise ValueError(
                f"this trainer was built as process {self.process_group.rank} of "
                f"{self.process_group.world_size} but torch.distributed now has this process as "
                f"{now.rank} of {now.world_size}: call init_distributed() before building the "
                "GALTrainer, and keep the process group until training ends"
            )

    def _check_process_group_at_fit_start(self) -> None:
        """:meth:`_check_process_group`; a process that fails it joins the others' check of
        the fit's start in the process group it is now in, so that they raise with it."""
        try:
            self._check_process_group()
        except ValueError:
            ProcessGroup.detect().differing({}, "fit (its start)", failed=True, device=self.device)
            raise

    @staticmethod
    def _module_device(module: nn.Module) -> torch.device:
        for p in module.parameters():
            return p.device
        return torch.device("cpu")

    @property
    def config(self) -> dict[str, Any]:
        """The hyperparameters a checkpoint records (``optimizer`` is None for a factory);
        :attr:`settings` holds them as a :class:`GALConfig`."""
        return self.settings.to_checkpoint()

    # ---------------------------------------------------------------- fit
    def fit(
        self,
        graph: Optional[Graph],
        task_batches: Iterable[Any],
        sensitive: SensitiveSpec = None,
        epochs: int = 25,
        *,
        x: Optional[Tensor] = None,
        callbacks: Union[Sequence[Callback], Callback, None] = (),
        progress: bool = True,
    ) -> History:
        """Trains until ``epochs`` epochs have been completed in total (continuing where an
        earlier ``fit`` or a loaded checkpoint stopped) or a callback stops it.

        Args:
            graph: the :class:`~galfast.Graph` encoded at every step; None when every batch
                brings its own graph (``GraphBatch``; then pairing must be ``"node"``).
            task_batches: an iterable, re-iterated every epoch, of batch objects understood by
                ``task_head`` and ``task_loss`` (``NodeBatches``, ``LinkBatches``,
                ``RatingBatches``, ``GraphBatches`` or your own). Batches are moved to the
                device with ``.to(device)`` (tuples, lists and dicts are walked).
            sensitive: a :class:`SensitiveAttribute` or a sequence of them (one adversary
                each); may be None only when ``lam == 0``.
            epochs: total epochs, pre-training included (FB15k-237: ``pretrain_epochs=35,
                epochs=155``).
            x: ``[num_nodes, F]`` encoder input features; None passes node ids instead.
            callbacks: :class:`Callback` objects run after every epoch (one alone, or None).
            progress: show a tqdm bar of the epochs with the latest losses, moved batch by
                batch where ``task_batches`` has a length.

        Returns:
            The trainer's :class:`History` (one record per epoch, all fits together).

        Raises:
            LossDiverged: an epoch's task or adversary loss was NaN or infinite.
        """
        self._check_process_group_at_fit_start()
        # With several processes, one that fails here still joins the others' check below, so
        # that they raise with it instead of waiting for it in their first step.
        failure = None
        try:
            epochs, graph, inputs, callbacks, adversaries = self._start_fit(
                graph, task_batches, sensitive, epochs, x, callbacks
            )
            progress = check_flag("progress", progress)
        except Exception as error:
            if not self.process_group.enabled:
                raise
            failure = error
        self._check_same_fit(
            None if failure else (graph, inputs, task_batches, adversaries, epochs), failure
        )
        # Every process starts from rank 0's modules (DDP's rule), once they are known to have
        # the same shapes; the optimizers' states are fresh or loaded from the same checkpoint,
        # hence equal too.
        self.process_group.broadcast([self.encoder, self.task_head, self.attacker])
        # Captured steps hold this fit's graph, inputs and attributes: a fit on other ones
        # captures afresh.
        context = (graph, inputs, *(a.attribute for a in adversaries))
        rebound = len(context) != len(self._context) or any(
            mine is not theirs for mine, theirs in zip(context, self._context)
        )
        if self._step_graphs is not None and rebound:
            self._step_graphs.clear()
        self._graph, self._x, self._context = graph, None if x is None else inputs, context

        self.stop_training = False
        if self._stopped_inside is not None and self.epoch < epochs:
            _warn_rerun(*self._stopped_inside)
        # Callbacks may differ between processes (a CheckpointEvery on rank 0 alone): one that
        # fails on one process fails the others here, not after their first step's timeout.
        failure = _callbacks_failure(callbacks, "on_fit_start", self)
        self.process_group.any(False, "fit (the callbacks' on_fit_start)", self.device, failure)
        bar = EpochProgress(epochs, self.epoch, batches_per_epoch(task_batches), progress)
        try:
            while self.epoch < epochs and not self.stop_training:
                record = self._run_epoch(graph, inputs, task_batches, adversaries, bar)
                self.history.append(record)
                failure = _callbacks_failure(callbacks, "on_epoch_end", self, record)
                # A callback that stops or fails one process stops or fails all: the others
                # would wait for it in their next step.
                self.stop_training = self.process_group.any(
                    self.stop_training, "fit (the end of an epoch)", self.device, failure
                )
                bar.epoch_done(self.epoch, record)
        finally:
            bar.close()
        return self.history

    def _start_fit(self, graph, task_batches, sensitive, epochs, x, callbacks):
        """``fit``'s checks of its arguments, made in each process alone: ``(epochs, graph,
        inputs, callbacks, adversaries)`` on the trainer's device."""
        epochs = check_number("epochs", epochs, minimum=0, integer=True)
        if graph is not None and not isinstance(graph, Graph):
            raise ValueError(f"graph must be a galfast.Graph or None, got {type(graph).__name__}")
        if graph is None and self.settings.pairing.hops > 0:
            raise ValueError(f"pairing {self.settings.pairing.name!r} needs the graph to walk on")
        callbacks = _callback_list(callbacks)
        if self.sampler is not None and graph is None:
            raise ValueError("sampled training (sampler=...) needs the graph to sample from")
        graph = None if graph is None else graph.to(self.device)
        inputs = None if graph is None else node_inputs(graph, x, self.device)
        if self.sampler is not None:
            sampled = SampledEncoder(
                self.sampler, graph, inputs, self.settings.seed, self.process_group
            )
            sampled.check_encoder(self.encoder)  # torch BatchNorm on several processes
            self._sampled = sampled
        if graph is not None and callable(getattr(task_batches, "check_nodes", None)):
            task_batches.check_nodes(graph.num_nodes)  # node, link and rating batches
        if callable(getattr(task_batches, "check_head", None)):
            task_batches.check_head(self.task_head)  # rating batches: the decoder's levels
        adversaries = self._adversaries(sensitive, _item_count(graph, task_batches))
        return epochs, graph, inputs, callbacks, adversaries

    def _adversaries(self, sensitive: SensitiveSpec, items: Optional[int]) -> list[_Adversary]:
        """One adversary per attribute, its known rows checked against the ``items`` (nodes,
        or graphs for graph-level batches) the embeddings will have; None: unknown."""
        if self.settings.lam == 0:
            return []
        if sensitive is None:
            raise ValueError("lam > 0 needs the sensitive attribute(s) to hide")
        attrs = as_attribute_list(sensitive)
        if isinstance(self.attacker, nn.ModuleDict):
            if set(self.attacker.keys()) != {a.name for a in attrs}:
                raise ValueError(
                    f"attacker keys {sorted(self.attacker.keys())} do not match the "
                    f"sensitive attribute names {sorted(a.name for a in attrs)}"
                )
            attackers = [self.attacker[a.name] for a in attrs]
        elif len(attrs) == 1:
            attackers = [self.attacker]
        else:
            raise ValueError(
                f"{len(attrs)} sensitive attributes need one attacker each: pass "
                "attacker as a mapping {name: module}"
            )
        adversaries = []
        for attr, attacker in zip(attrs, attackers):
            if self.settings.distance == "wasserstein" and attr.kind == "continuous":
                raise ValueError(
                    f"{attr.name}: distance='wasserstein' needs a discrete "
                    "attribute; use distance='tv' for continuous ones"
                )
            known = attr.known(items)
            if attr.kind in ("binary", "categorical"):
                _warn_single_class(attr.name, known.targets)
            adversaries.append(_Adversary(attr, known.to(self.device), attacker))
        return adversaries

    # ---------------------------------------------------------------- one epoch
    def _run_epoch(
        self, graph, inputs, task_batches, adversaries, bar: EpochProgress
    ) -> dict[str, Any]:
        started = time.perf_counter()
        pretrain = self.epoch < self.settings.pretrain_epochs
        adversarial = not pretrain and bool(adversaries)
        task_losses, adv_losses = [], {a.attribute.name: [] for a in adversaries}
        pairs = {a.attribute.name: 0 for a in adversaries}
        failures = dict(pairs)
        adv_steps = batches = 0
        # Once per epoch, not per step: only callbacks and embed() (which restores the mode)
        # run between steps, and Module.train() walks every submodule.
        self._set_train_mode()
        # Batches with an order of their own per epoch draw this epoch's: a resumed run (fresh
        # batches, counting from 0) then replays the uninterrupted run's orders.
        if callable(getattr(task_batches, "set_epoch", None)):
            task_batches.set_epoch(self.epoch)
        # Per-epoch seeding keys the batches' shuffles and negatives and the modules' dropout
        # by (seed, epoch): an epoch replays identically after a resume.
        epoch_seed = derive_seed(self.settings.seed, "epoch", self.epoch)
        first_step, first_update = self.step, self._updates
        try:
            with seeded_globals(epoch_seed, cuda_rng_devices(self.device)):
                for batch in task_batches:
                    batches += 1
                    batch = move_to_device(batch, self.device)
                    due = (self.step + 1) % self.settings.adv_every == 0
                    if adversarial and due and self.settings.adv_update == "joint":
                        task_loss, losses = self._joint_step(
                            graph, inputs, batch, adversaries, pairs, failures
                        )
                        task_losses.append(task_loss)
                        for name, value in losses.items():
                            adv_losses[name].append(value)
                        adv_steps += 1
                        self.step += 1
                        bar.batch_done()
                        continue
                    if not (adversarial and due and self.settings.adv_schedule == "instead"):
                        step = lambda b: self._task_step(graph, inputs, b)  # noqa: E731
                        task_losses.append(self._run_step("task", step, batch))
                    if adversarial and due:
                        losses = self._adversary_step(
                            graph, inputs, batch, adversaries, pairs, failures
                        )
                        for name, value in losses.items():
                            adv_losses[name].append(value)
                        adv_steps += 1
                    self.step += 1
                    bar.batch_done()
        except BaseException:
            # Modules changed: a step counted itself, or an optimizer stepped in one that had
            # not yet (a replayed CUDA graph calls no hook, but counts itself when done).
            if self.step != first_step or self._updates != first_update:
                self._stopped_inside = (self.epoch, self.step - first_step)
            raise
        if batches == 0:
            raise ValueError(
                f"task_batches yielded no batch in epoch {self.epoch + 1}: nothing to train on "
                "(an empty training set, or an iterator that is exhausted after one pass?)"
            )
        self.process_group.broadcast_buffers([self.encoder, self.task_head, self.attacker])
        self.epoch += 1
        self._stopped_inside = None
        phase = "pretrain" if pretrain else ("adversarial" if adversarial else "task")
        record: dict[str, Any] = {"epoch": self.epoch, "phase": phase}
        if task_losses:
            record["task_loss"] = self._mean_over_steps(task_losses, "task loss")
        record["task_steps"], record["adv_steps"] = len(task_losses), adv_steps
        for name, values in adv_losses.items():
            if values:
                record[f"adv_loss/{name}"] = self._mean_over_steps(
                    values, f"adversary loss of {name!r}"
                )
            if adversarial:
                record[f"pairs/{name}"], record[f"pair_failures/{name}"] = (
                    pairs[name],
                    failures[name],
                )
                if adv_steps and pairs[name] == 0:
                    _warn_unpaired(name, failures[name], self.epoch)
        record["seconds"] = time.perf_counter() - started
        return record

    def _check_same_fit(self, prepared: Optional[tuple], failure: Optional[Exception]) -> None:
        """ValueError in every process unless all were given the same fit: processes with
        other data would have their gradients averaged into a run of neither, and one with
        more batches would wait for the others at its last steps. ``prepared`` holds the fit's
        ``(graph, inputs, task_batches, adversaries, epochs)``, None where ``failure`` (this
        process's error in checking its arguments) is raised here, once every process knows.
        Checked once, when ``fit`` starts: a check per step would cost a host wait per step on
        a GPU."""
        if not self.process_group.enabled:
            return
        fingerprints = {}
        if failure is None:
            try:
                fingerprints = self._fit_fingerprints(*prepared)
            except Exception as error:  # a user's batches that fail to iterate
                failure = error
        differing = self.process_group.differing(
            fingerprints, "fit (its start)", failed=failure is not None, device=self.device
        )
        if failure is not None:
            raise failure
        if differing:
            raise ValueError(
                f"the {self.process_group.world_size} processes were given different "
                f"{', '.join(differing)}: every process must build the same graph, features, "
                "attributes, batches and trainer (their gradients are averaged)"
            )

    def _fit_fingerprints(self, graph, inputs, task_batches, adversaries, epochs):
        optimizers = [self.task_optimizer, self.adversary_optimizer]
        modules = [self.encoder, self.task_head, self.attacker]
        parts = {
            "settings": [self.config, self._sampler_record()],
            # Their values may differ (rank 0's are broadcast), their shapes may not: a
            # broadcast of another shape aborts the processes.
            "modules (parameter and buffer shapes)": [_state_shapes(m) for m in modules],
            "epochs (the fit's and the trainer's epoch and step)": [epochs, self.epoch, self.step],
            "optimizer states": [_optimizer_tensors(o) for o in optimizers],
            "graph": [graph.num_nodes, graph.rowptr, graph.col, graph.edge_weight],
            "x": [inputs],
            "task batch settings (type, length, attributes)": _batches_values(task_batches),
            "first task batch (or every batch of a list)": self._first_batch_values(task_batches),
        }
        for adversary in adversaries:
            attribute, known = adversary.attribute, adversary.known
            parts[f"sensitive attribute {attribute.name!r}"] = [
                attribute.kind,
                known.nodes,
                known.targets,
            ]
        return {name: fingerprint(_flat(values), self.device) for name, values in parts.items()}

    def _first_batch_values(self, task_batches: Any) -> list[Any]:
        """What identifies the first batch the coming epoch yields (every batch of a list or
        tuple): batches of a user's type may differ between processes whose attributes agree
        (split by rank, as for DDP). Drawn as the epoch will draw it, under its seed, which is
        then restored; an iterator that is its own iterable would lose the batch, and is not
        drawn from."""
        if isinstance(task_batches, (list, tuple)):
            return [batch_values(batch) for batch in task_batches]
        if callable(getattr(task_batches, "set_epoch", None)):
            task_batches.set_epoch(self.epoch)
        epoch_seed = derive_seed(self.settings.seed, "epoch", self.epoch)
        with seeded_globals(epoch_seed, cuda_rng_devices(self.device)):
            batches = iter(task_batches)
            if batches is task_batches:
                return ["an iterator"]
            return batch_values(next(batches, None))

    def _mean_over_steps(self, values: list[Tensor], loss: str) -> float:
        """The mean over the epoch's steps of a loss; with several processes each step's value
        is this process's share (loss x its part of the batch), summed over the processes.
        Raises :class:`LossDiverged` when it is not finite: checked here, where the losses are
        read back to the host anyway, so no step waits for the device."""
        steps = torch.stack(values)
        if self.process_group.enabled:
            # In float64 on every process: a process whose shares were all empty holds float32
            # zeros, and gloo aborts an all_reduce whose tensors differ in size between ranks.
            steps = self.process_group.sum(steps.double())
        mean = float(steps.mean())
        if not math.isfinite(mean):
            raise LossDiverged(loss, self.epoch, steps.tolist(), mean)
        return mean

    def _encode(self, graph, inputs, batch) -> tuple[Tensor, Optional[Tensor]]:
        """``(z, ids)``: ids None means row i of z is node i (full-graph encoding)."""
        if hasattr(batch, "encode"):
            return batch.encode(self.encoder)
        if graph is None:
            raise ValueError(
                "fit(graph=None) needs batches that encode themselves "
                "(batch.encode(encoder), e.g. GraphBatch)"
            )
        return _node_embeddings(self.encoder(inputs, graph), graph), None

    def _run_step(self, name: str, step: Callable[[Any], Any], inputs: Any) -> Any:
        if self._step_graphs is None:
            return step(inputs)
        return self._step_graphs.run(name, step, inputs)

    def _make_capturable(self) -> None:
        if self._step_graphs is not None:
            for optimizer in (self.task_optimizer, self.adversary_optimizer):
                if optimizer is not None:
                    make_capturable(optimizer)

    def _set_train_mode(self) -> None:
        for module in (self.encoder, self.task_head, self.attacker):
            if isinstance(module, nn.Module):
                module.train()

    def _task_step(self, graph, inputs, batch) -> Tensor:
        if self._sampled is not None:
            return self._sampled_task_step(batch)
        z, _ = self._encode(graph, inputs, batch)
        loss = self.task_loss(self.task_head(z, batch), batch)
        self.task_optimizer.zero_grad()
        loss.backward()
        self.task_optimizer.step()
        return loss.detach()

    def _known_rows(self, adversary: _Adversary, ids: Tensor, pairs) -> tuple[Tensor, Tensor]:
        """For a batch that encoded its own graphs: rows of z whose attribute is known."""
        rows, targets = adversary.known.lookup(ids)
        pairs[adversary.attribute.name] += rows.numel()
        return rows, targets

    def _paired_rows(self, adv_index, adversary, graph, pairs, failures):
        """Rows of the full-graph z the attacker reads, and the targets it must predict."""
        name, known, cfg = adversary.attribute.name, adversary.known, self.settings
        count = known.nodes.numel()
        if cfg.adv_batch_size is not None and cfg.adv_batch_size < count:
            gen = seeded_generator(derive_seed(cfg.seed, "adversary_batch", self.step, adv_index))
            pick = torch.randperm(count, generator=gen)[: cfg.adv_batch_size]
            pick = to_device_without_waiting(pick, self.device)
            nodes, targets = known.nodes[pick], known.targets[pick]
        else:
            nodes, targets = known.nodes, known.targets
        seed = derive_seed(cfg.seed, "pairing", self.step, adv_index)
        paired = pair_nodes(graph, nodes, cfg.pairing, seed=seed, walk_mode=cfg.walk_mode)
        pairs[name] += paired.keep.numel()
        failures[name] += paired.failures
        if cfg.pairing.hops == 0:  # every node kept: no gather (and no new tensor) needed
            return paired.partners, targets
        return paired.partners, targets[paired.keep]

    def _adversary_step(self, graph, inputs, batch, adversaries, pairs, failures):
        if self._sampled is not None:
            picked = [
                self._paired_rows(i, adversary, graph, pairs, failures)
                for i, adversary in enumerate(adversaries)
            ]
            return self._sampled_adversary_step(batch, adversaries, picked, joint=False)[1]
        if hasattr(batch, "encode"):
            if self.settings.pairing.hops > 0:
                raise ValueError(
                    f"pairing {self.settings.pairing.name!r} is undefined for batches that "
                    "encode their own graphs (one embedding per graph): use 'node'"
                )
            z, ids = batch.encode(self.encoder)
            picked = [self._known_rows(adversary, ids, pairs) for adversary in adversaries]
            return self._adversary_update(z, adversaries, picked)
        picked = [
            self._paired_rows(i, adversary, graph, pairs, failures)
            for i, adversary in enumerate(adversaries)
        ]

        def step(picked):
            z, _ = self._encode(graph, inputs, batch)
            return self._adversary_update(z, adversaries, picked)

        if self.settings.pairing.hops > 0:  # failed walks change the batch shape from step to step
            return step(picked)
        return self._run_step("adversary", step, picked)

    def _joint_step(self, graph, inputs, batch, adversaries, pairs, failures):
        """``adv_update="joint"``: one encoding and one backward of the task loss plus the
        adversaries' losses behind ``grad_reverse(z, lam)``; the task optimizer steps the
        encoder and the head, the adversary optimizer the attackers."""
        if self._sampled is not None:
            picked = [
                self._paired_rows(i, adversary, graph, pairs, failures)
                for i, adversary in enumerate(adversaries)
            ]
            return self._sampled_adversary_step(batch, adversaries, picked, joint=True)
        if hasattr(batch, "encode"):
            if self.settings.pairing.hops > 0:
                raise ValueError(
                    f"pairing {self.settings.pairing.name!r} is undefined for batches that "
                    "encode their own graphs (one embedding per graph): use 'node'"
                )
            z, ids = batch.encode(self.encoder)
            picked = [self._known_rows(adversary, ids, pairs) for adversary in adversaries]
            return self._joint_update(z, batch, adversaries, picked)
        picked = [
            self._paired_rows(i, adversary, graph, pairs, failures)
            for i, adversary in enumerate(adversaries)
        ]

        def step(inputs_):
            batch_, picked_ = inputs_
            z, _ = self._encode(graph, inputs, batch_)
            return self._joint_update(z, batch_, adversaries, picked_)

        if self.settings.pairing.hops > 0:  # failed walks change the batch shape from step to step
            return step((batch, picked))
        return self._run_step("joint", step, (batch, picked))

    def _joint_update(self, z, batch, adversaries, picked) -> tuple[Tensor, dict[str, Tensor]]:
        task_loss = self.task_loss(self.task_head(z, batch), batch)
        losses, adversarial = self._adversary_losses(
            grad_reverse(z, self.settings.lam), adversaries, picked
        )
        total = task_loss if adversarial is None else task_loss + adversarial
        self.task_optimizer.zero_grad()
        self.adversary_optimizer.zero_grad()
        total.backward()
        self.task_optimizer.step()
        self.adversary_optimizer.step()
        self._clip_critics(adversaries)
        return task_loss.detach(), losses

    def _adversary_update(self, z, adversaries, picked) -> dict[str, Tensor]:
        """One adversary optimizer step on the attackers' losses over ``picked`` rows of z."""
        losses, total = self._adversary_losses(grad_reverse(z), adversaries, picked)
        if total is not None:
            self.adversary_optimizer.zero_grad()
            total.backward()
            self.adversary_optimizer.step()
            self._clip_critics(adversaries)
        return losses

    def _adversary_losses(
        self, z_rev: Tensor, adversaries, picked
    ) -> tuple[dict[str, Tensor], Optional[Tensor]]:
        """Each attacker's loss on its ``picked`` rows of the reversed embeddings (detached, by
        attribute name) and their sum (None when no attacker had a row)."""
        losses, total = {}, None
        for adversary, (rows, targets) in zip(adversaries, picked):
            if rows.numel() == 0:
                continue
            attr = adversary.attribute
            outputs = adversary.attacker(z_rev[rows])
            check_outputs(attr.name, attr.kind, outputs, targets, attr.num_outputs)
            # The attribute checked its values when built: no device wait per step.
            loss = adversary_loss(
                outputs, targets, attr.kind, self.settings.distance, check_targets=False
            )
            losses[attr.name] = loss.detach()
            total = loss if total is None else total + loss
        return losses, total

    def _clip_critics(self, adversaries) -> None:
        """The Wasserstein critics' weight clipping (their Lipschitz bound) after each step."""
        if self.settings.distance == "wasserstein":
            for adversary in adversaries:
                clip_weights(adversary.attacker, self.settings.clip)

    # ---------------------------------------------------------------- embeddings
    @torch.no_grad()
    def embed(
        self,
        graph: Optional[Graph] = None,
        x: Optional[Tensor] = None,
        *,
        chunk_size: Optional[int] = None,
    ) -> Tensor:
        """The encoder's embeddings ``[num_nodes, D]`` in eval mode (BatchNorm uses running
        statistics, no dropout), detached. Defaults to the graph and ``x`` of the last
        ``fit`` (its ``x`` also when that graph is passed); if that fit had features, any other
        ``x`` must have their width and dtype.

        With ``chunk_size``, or on a sampled trainer (``sampler.embed_chunk_size``) whose
        encoder supports it, the encoder runs layer by layer over all nodes in chunks of
        ``chunk_size`` destinations (:func:`~galfast.train.layerwise.layerwise_embed`): the
        same embeddings for a graph too big for one pass."""
        if graph is None:
            if self._graph is None:
                raise ValueError("embed() needs a graph (no fit on a graph has run yet)")
            graph = self._graph
        if not isinstance(graph, Graph):
            raise ValueError(f"graph must be a galfast.Graph, got {type(graph).__name__}")
        graph = graph.to(self.device)
        if x is None and graph is self._graph:
            x = self._x
        elif self._x is not None:
            # The encoder was trained on features: node ids, or other ones, fail inside it.
            fitted = self._x.shape[1:], self._x.dtype
            if not isinstance(x, Tensor) or (x.shape[1:], x.dtype) != fitted:
                given = f"{list(x.shape)} {x.dtype}" if isinstance(x, Tensor) else repr(x)[:40]
                raise ValueError(
                    f"x must be features like fit's ([num_nodes, {', '.join(map(str, fitted[0]))}]"
                    f" {fitted[1]}), got {given}"
                )
        if chunk_size is not None:
            chunk_size = check_number("chunk_size", chunk_size, minimum=1, integer=True)
        elif self.sampler is not None and supports_layerwise(self.encoder):
            chunk_size = self.sampler.embed_chunk_size
        was_training = self.encoder.training
        self.encoder.eval()
        try:
            inputs = node_inputs(graph, x, self.device)
            if chunk_size is not None:
                z = layerwise_embed(self.encoder, graph, inputs, chunk_size)
            else:
                z = self.encoder(inputs, graph)
            return _node_embeddings(z, graph).detach()
        finally:
            self.encoder.train(was_training)

    # ---------------------------------------------------------------- checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Everything an exact resume needs: module and optimizer states, the epoch and step
        counters, the history, the config and the sampler. No generator state is needed: every
        draw is keyed by (seed, epoch, step), see ``seed``.

        Raises:
            ValueError: a fit stopped inside an epoch (an exception, Ctrl-C) and no epoch has
                completed since: the states hold part of that epoch, which a resume (starting
                epochs from their first batch) would replay on top of itself.
        """
        if self._stopped_inside is not None:
            epoch, steps = self._stopped_inside
            raise ValueError(
                f"the last fit stopped inside epoch {epoch + 1}, after {steps} of its steps: "
                "the modules and optimizers hold part of that epoch, so a checkpoint of them "
                "would not resume exactly; save at an epoch's end (CheckpointEvery, or after "
                "fit returns), or load_checkpoint() a saved one"
            )
        return {
            "format": CHECKPOINT_FORMAT,
            "config": self.config,
            "sampler": self._sampler_record(),
            "encoder": module_state(self.encoder),
            "task_head": (
                module_state(self.task_head) if isinstance(self.task_head, nn.Module) else None
            ),
            "attacker": None if self.attacker is None else module_state(self.attacker),
            "task_optimizer": self.task_optimizer.state_dict(),
            "adversary_optimizer": (
                None if self.adversary_optimizer is None else self.adversary_optimizer.state_dict()
            ),
            "epoch": self.epoch,
            "step": self.step,
            "history": self.history.to_list(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restores :meth:`state_dict` into this trainer (built with the same modules and
        hyperparameters; a mismatch raises ValueError naming the differing settings, and
        leaves the trainer as it was)."""
        self._load_state(state, "state")

    def _load_state(self, state: Mapping[str, Any], source: str) -> None:
        check_checkpoint(state, source)
        differing = self.settings.differences(state["config"])
        # Checkpoints written before the sampler was recorded: it is unknown.
        saved_sampler = state.get("sampler", self._sampler_record())
        if saved_sampler != self._sampler_record():
            differing.append(f"sampler: saved {saved_sampler!r}, now {self._sampler_record()!r}")
        if differing:
            detail = ", ".join(differing)
            raise ValueError(f"the checkpoint was made with other settings ({detail})")
        if (state["attacker"] is None) != (self.attacker is None):
            raise ValueError("the checkpoint and this trainer disagree on having an attacker")
        self._check_fits(state, source)
        load_module_state(self.encoder, state["encoder"])
        if isinstance(self.task_head, nn.Module):
            load_module_state(self.task_head, state["task_head"])
        if self.attacker is not None:
            load_module_state(self.attacker, state["attacker"])
        self.task_optimizer.load_state_dict(state["task_optimizer"])
        if self.adversary_optimizer is not None:
            self.adversary_optimizer.load_state_dict(state["adversary_optimizer"])
        self.epoch, self.step = int(state["epoch"]), int(state["step"])
        self.history = History(state["history"])
        self._stopped_inside = None
        self._make_capturable()
        if self._step_graphs is not None:
            self._step_graphs.clear()  # captured steps read the replaced optimizer state

    def _count_update(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        self._updates += 1

    def _sampler_record(self) -> Optional[dict[str, Any]]:
        return None if self.sampler is None else self.sampler.to_checkpoint()

    def _check_fits(self, state: Mapping[str, Any], source: str) -> None:
        """Every module and optimizer state of ``state`` fits this trainer's, checked before
        any is loaded."""
        for name in ("encoder", "task_head", "attacker"):
            module = getattr(self, name)
            if isinstance(module, nn.Module):
                check_module_state(name, module, state[name], source)
        for name in ("task_optimizer", "adversary_optimizer"):
            optimizer = getattr(self, name)
            if optimizer is not None:
                check_optimizer_state(name, optimizer, state[name], source)

    def save_checkpoint(self, path: Union[str, os.PathLike]) -> None:
        """Writes :meth:`state_dict` to ``path`` (atomically: a temporary file is renamed).
        With several processes rank 0 alone writes (all hold the same state) and waits for no
        other process, so ``if rank == 0: trainer.save_checkpoint(path)`` works, in a callback
        too; another process that calls it returns once rank 0 has written the file (it may
        then read it), and raises if rank 0 failed to, or did not save within the process
        group's timeout."""
        self._check_process_group()
        group = self.process_group
        # Rank 0's save and another process's wait pair by path and place in the run (and how
        # often this trainer saved there), not by a count of calls that rank 0 may make alone.
        place = f"checkpoint {os.fspath(path)!r} at epoch {self.epoch}, step {self.step}"
        self._saves[place] = self._saves.get(place, 0) + 1
        key = f"{place} #{self._saves[place]}"
        if group.rank != 0:
            failure = group.wait_for(key, f"save_checkpoint({os.fspath(path)!r})")
            if failure:
                # Rank 0's error as the cause: the traceback shows it, the message stays.
                raise OSError(f"rank 0 could not write the checkpoint {os.fspath(path)}") from (
                    RuntimeError(f"rank 0's error: {failure}")
                )
            return
        try:
            write_checkpoint(self.state_dict(), path)
        except Exception as error:
            group.publish(key, f"{type(error).__name__}: {error}")
            raise
        group.publish(key, "")

    def load_checkpoint(self, path: Union[str, os.PathLike]) -> GALTrainer:
        """Loads a checkpoint written by :meth:`save_checkpoint` into this trainer; the next
        ``fit`` continues exactly where the saved run stopped. Returns ``self``."""
        state = read_checkpoint(path, self.device)
        self._load_state(state, os.fspath(path))
        return self

    @classmethod
    def from_config(
        cls,
        encoder: nn.Module,
        task_head: Callable[[Tensor, Any], Tensor],
        attacker: AttackerSpec = None,
        *,
        task_loss: Callable[[Any, Any], Tensor],
        config: Union[GALConfig, Mapping[str, Any]],
        device: Optional[Union[str, torch.device]] = None,
        cuda_graphs: bool = False,
        sampler: Optional[NeighborSampling] = None,
    ) -> GALTrainer:
        """A trainer with the hyperparameters of ``config`` (a :class:`GALConfig` or a dict of
        its fields, see :meth:`GALConfig.from_dict`); the same as passing its fields as keyword
        arguments."""
        if isinstance(config, Mapping):
            config = GALConfig.from_dict(config)
        if not isinstance(config, GALConfig):
            raise ValueError(
                f"config must be a GALConfig or a dict of its fields, got {type(config).__name__}"
            )
        return cls(
            encoder,
            task_head,
            attacker,
            task_loss=task_loss,
            device=device,
            cuda_graphs=cuda_graphs,
            sampler=sampler,
            **config.trainer_kwargs(),
        )

    @classmethod
    def resume(
        cls,
        path: Union[str, os.PathLike],
        encoder: nn.Module,
        task_head: Callable[[Tensor, Any], Tensor],
        attacker: AttackerSpec = None,
        *,
        task_loss: Callable[[Any, Any], Tensor],
        optimizer: Optional[OptimizerSpec] = None,
        device: Optional[Union[str, torch.device]] = None,
        sampler: Optional[NeighborSampling] = None,
    ) -> GALTrainer:
        """Builds a trainer with the hyperparameters saved in ``path`` around freshly built
        modules of the same architecture, and loads the saved state. ``optimizer`` is needed
        only when the saved run used a factory (which a checkpoint cannot store); ``sampler``,
        the saved run's, when it trained on sampled batches (a run may resume on any number of
        processes).

        Example:
            >>> trainer = GALTrainer.resume("run.pt", make_encoder(), head, attacker,
            ...                             task_loss=link_loss)  # doctest: +SKIP
            >>> trainer.fit(graph, batches, sensitive, epochs=50)  # doctest: +SKIP
        """
        state = read_checkpoint(path, device or "cpu")
        check_checkpoint(state, os.fspath(path))
        settings = GALConfig.from_checkpoint(state["config"], optimizer)
        trainer = cls.from_config(
            encoder,
            task_head,
            attacker,
            task_loss=task_loss,
            config=settings,
            device=device,
            sampler=sampler,
        )
        trainer._load_state(state, os.fspath(path))
        return trainer
