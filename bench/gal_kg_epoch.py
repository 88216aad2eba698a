"""A GAL training epoch of the knowledge-graph model on FB15k-237, galfast against the same model
built the reference way (bench/kg_reference_model.py: CompGCN's per-edge messages + scatter,
its ConvE and label building, GAL's adversary step), timed over a fixed number of batches and
extrapolated to the epoch's 1,170.

    python bench/gal_kg_epoch.py --batches 6                  # both, then the ratio
    python bench/gal_kg_epoch.py --check                      # same losses, dropout off
    python bench/gal_kg_epoch.py --impl galfast --profile --breakdown

The model is the paper's (galfast's experiments/knowledge_graph.py defaults): learned 100-wide
embeddings, one CompGCN layer with circular correlation to 200, ConvE (200 filters 7x7), 1-N
scoring against all 14,541 entities with label smoothing 0.1, Adam 1e-3; lambda 1 with the
adversary (AttackerMLP 200-32-32-50, multi-label BCE on the top-50 entity types) on 128 entities
after every task step, each step encoding the whole graph. Both sides start from the same
weights and see the same query batches and adversary rows. Each side: ``--warmup`` batches
untimed, then ``--batches`` timed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from itertools import islice
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from kg_reference_model import ReferenceGAL, from_galfast  # noqa: E402

from galfast.datasets import fb15k_237  # noqa: E402
from galfast.experiments.kg_options import kg_model_options  # noqa: E402
from galfast.experiments.kg_sensitive import kg_sensitive_attribute  # noqa: E402
from galfast.experiments.knowledge_graph import build_kg_model  # noqa: E402
from galfast.gal.seeding import derive_seed, seeded_generator  # noqa: E402
from galfast.models import AttackerMLP, kg_queries, one_to_n_loss  # noqa: E402
from galfast.train import GALTrainer, OneToNBatches, OneToNHead, OneToNLoss  # noqa: E402

DEFAULT_DATA = HERE.parent.parent / "shared" / "data"
LAM, LR, BATCH, SMOOTH, SEED = 1.0, 1e-3, 128, 0.1, 0
NO_DROPOUT = tuple(
    (name, 0.0) for name in ("conv_dropout", "hidden_dropout", "feature_dropout", "decoder_dropout")
)


class FirstBatches:
    """The first `count` batches of each epoch of `batches`."""

    def __init__(self, batches, count: int) -> None:
        self.batches, self.count = batches, count

    def __iter__(self):
        return islice(iter(self.batches), self.count)


def load(root: Path):
    ds = fb15k_237(root=root)
    return ds, kg_sensitive_attribute(ds, "types")


def build(ds, options=()):
    """galfast's model and attacker, seeded: both sides copy these initial weights."""
    torch.manual_seed(SEED)
    model = build_kg_model(ds, kg_model_options(options))
    return model, AttackerMLP(model.encoder.convs[0].out_channels, 50)


def galfast_trainer(model, attacker):
    return GALTrainer(
        model.encoder,
        OneToNHead(model),
        attacker,
        task_loss=OneToNLoss(SMOOTH),
        lam=LAM,
        lr=LR,
        adv_batch_size=BATCH,
        seed=SEED,
    )


def query_order(num_queries: int, epoch: int) -> torch.Tensor:
    """OneToNBatches(seed=SEED)'s order of epoch `epoch`."""
    gen = seeded_generator(derive_seed(SEED, "kg_query_order", epoch))
    return torch.randperm(num_queries, generator=gen)


def adversary_rows(known, step: int):
    """GALTrainer's adversary batch at `step` (node pairing): nodes and their targets."""
    gen = seeded_generator(derive_seed(SEED, "adversary_batch", step, 0))
    pick = torch.randperm(known.nodes.numel(), generator=gen)[:BATCH]
    return known.nodes[pick], known.targets[pick].float()


class ReferenceRun:
    """The reference loop over the same batches (epoch e, batch b of OneToNBatches' order) and
    adversary rows (by step) as galfast's trainer."""

    def __init__(self, ds, attr, model, attacker, queries, from_logits=False):
        ref, ref_attacker = from_galfast(model, attacker, ds.train, ds.num_relations)
        self.gal = ReferenceGAL(ref, ref_attacker, LR, LAM, from_logits)
        self.queries, self.known, self.step = queries, attr.known(ds.num_entities), 0
        offsets, answers = queries.offsets.numpy(), queries.answers.numpy()
        self.answers = [answers[offsets[q] : offsets[q + 1]] for q in range(len(offsets) - 1)]

    def run(self, epoch: int, count: int) -> list[tuple[float, float]]:
        order = query_order(self.queries.num_queries, epoch)
        losses = []
        for b in range(count):
            index = order[b * BATCH : (b + 1) * BATCH]
            query = self.queries.queries[index]
            rows, targets = adversary_rows(self.known, self.step)
            answers = [self.answers[q] for q in index.tolist()]
            task, adv = self.gal.step(query[:, 0], query[:, 1], answers, SMOOTH, rows, targets)
            losses.append((float(task), float(adv)))
            self.step += 1
        return losses


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def run_galfast(ds, attr, args) -> dict:
    model, attacker = build(ds)
    trainer = galfast_trainer(model, attacker)
    queries = kg_queries(ds.train, ds.num_entities, ds.num_relations)
    batches = OneToNBatches(queries, BATCH, seed=SEED)
    trainer.fit(ds.graph, FirstBatches(batches, args.warmup), attr, 1, progress=False)
    seconds = timed(
        lambda: trainer.fit(ds.graph, FirstBatches(batches, args.batches), attr, 2, progress=False)
    )
    if args.profile:
        profile(lambda: trainer.fit(ds.graph, FirstBatches(batches, 2), attr, 3, progress=False))
    if args.breakdown:
        breakdown(model, attacker, trainer, batches, attr, ds)
    return {"impl": "galfast", "seconds": seconds, "epoch_batches": len(batches)}


def run_reference(ds, attr, args) -> dict:
    model, attacker = build(ds)
    queries = kg_queries(ds.train, ds.num_entities, ds.num_relations)
    run = ReferenceRun(ds, attr, model, attacker, queries)
    run.run(0, args.warmup)
    seconds = timed(lambda: run.run(1, args.batches))
    if args.profile:
        profile(lambda: run.run(2, 2))
    epoch_batches = len(OneToNBatches(queries, BATCH))
    return {"impl": "reference", "seconds": seconds, "epoch_batches": epoch_batches}


def check(ds, attr, steps: int) -> None:
    """Dropout off on both sides and the reference's task loss taken from its logits: the
    per-step task and adversary losses agree."""
    queries = kg_queries(ds.train, ds.num_entities, ds.num_relations)
    model, attacker = build(ds, NO_DROPOUT)
    ref = ReferenceRun(ds, attr, model, attacker, queries, from_logits=True)
    trainer = galfast_trainer(model, attacker)
    batches = OneToNBatches(queries, BATCH, seed=SEED)
    theirs = [ref.run(e, 1)[0] for e in range(steps)]
    ours = []
    for e in range(steps):
        record = trainer.fit(ds.graph, FirstBatches(batches, 1), attr, e + 1, progress=False).last
        ours.append((record["task_loss"], record["adv_loss/types"]))
    for e, (a, b) in enumerate(zip(ours, theirs)):
        print(
            f"step {e}: galfast task {a[0]:.6f} adv {a[1]:.6f} | "
            f"reference task {b[0]:.6f} adv {b[1]:.6f}"
        )
    worst = max(abs(x - y) / abs(y) for a, b in zip(ours, theirs) for x, y in zip(a, b))
    print(f"largest relative difference {worst:.2e}")


def profile(fn) -> None:
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    print(
        prof.key_averages().table(
            sort_by="self_cpu_time_total", row_limit=25, max_name_column_width=44
        )
    )


def breakdown(model, attacker, trainer, batches, attr, ds, repeats: int = 3) -> None:
    """Median seconds of each part of one GAL batch, run alone (galfast)."""
    encoder = model.encoder
    batch = next(iter(batches))
    known = attr.known(ds.num_entities)
    rows, targets = adversary_rows(known, 0)

    def encoder_pass():
        z, rel = encoder.embed()
        (z.sum() + rel.sum()).backward()

    z0, rel0 = (t.detach().requires_grad_() for t in encoder.embed())

    def decoder_pass():
        logits = model.decoder(z0[batch.entity], rel0[batch.relation], z0)
        one_to_n_loss(logits, batch.targets, SMOOTH).backward()

    def attacker_pass():
        out = attacker(z0[rows])
        torch.nn.functional.binary_cross_entropy_with_logits(out, targets).backward()

    parts = {
        "batch building (targets)": lambda: next(iter(batches)),
        "encoder forward+backward (x2 per batch)": encoder_pass,
        "ConvE decoder + 1-N loss forward+backward": decoder_pass,
        "attacker forward+backward": attacker_pass,
        "task Adam step": trainer.task_optimizer.step,
        "adversary Adam step": trainer.adversary_optimizer.step,
    }
    model.train()
    for name, fn in parts.items():
        times = [timed(fn) for _ in range(repeats)]
        print(json.dumps({"part": name, "seconds": statistics.median(times)}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument(
        "--impl", nargs="+", choices=("galfast", "reference"), default=["galfast", "reference"]
    )
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument(
        "--check", type=int, default=0, metavar="STEPS", help="compare losses, dropout off"
    )
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--breakdown", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    ds, attr = load(args.data)
    if args.check:
        check(ds, attr, args.check)
        return
    print(f"threads {torch.get_num_threads()}, load before {os.getloadavg()[0]:.1f}", flush=True)
    results = {}
    for impl in args.impl:
        result = (run_galfast if impl == "galfast" else run_reference)(ds, attr, args)
        result["per_batch"] = result["seconds"] / args.batches
        result["epoch_estimate_s"] = result["per_batch"] * result["epoch_batches"]
        result["load_after"] = os.getloadavg()[0]
        results[impl] = result
        print(json.dumps(result), flush=True)
    if len(results) == 2:
        ratio = results["reference"]["per_batch"] / results["galfast"]["per_batch"]
        print(f"speed-up {ratio:.2f}x over {args.batches} batches each")


if __name__ == "__main__":
    main()
