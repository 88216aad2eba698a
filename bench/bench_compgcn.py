"""One CompGCN layer's forward+backward on FB15k-237: galfast.nn.CompGCNConv against CompGCN's
layer as its authors wrote it (per-edge messages + scatter; bench/compgcn_reference.py), time
and peak memory, for the three compositions.

    python bench/bench_compgcn.py                      # CPU, the FB15k-237 copy if present
    python bench/bench_compgcn.py --device cuda --repeats 20
    python bench/bench_compgcn.py --data /path/to/FB15k-237 --compositions corr

The graph is FB15k-237's training triples (272,115, 237 relations, 14,541 entities) read from
``--data`` (``train.txt``/``valid.txt``/``test.txt``, ``head<TAB>relation<TAB>tail``) when it
exists, else random triples of the same sizes. As in CompGCN, both layers see the triples and
their inverses (474 relation embeddings, 544,230 edges) plus one self loop per entity, with
dimension 200 -> 200, dropout 0.1, batch norm and tanh, in training mode; backward reaches the
entity and relation embeddings and every parameter.

Each (layer, composition) runs in a fresh child process that builds its inputs, runs one
warm-up step (one-time caches: galfast's transposes and relation order), then measures:
- peak memory of one step: CPU, the rise of the resident set above its level just before the
  step, read from the kernel's high-water mark (VmHWM, reset through /proc/self/clear_refs),
  with glibc serving every allocation above 64 KiB by mmap and trimming freed memory
  (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_) so freed tensors leave the resident set;
  CUDA, torch.cuda.max_memory_allocated() above the memory allocated before the step;
- time: the median of ``--repeats`` further steps.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parent.parent / "shared" / "data" / "fb15k-237"
DIM = 200
# FB15k-237's sizes, for random triples when the data is absent.
ENTITIES, RELATIONS, TRAIN_TRIPLES = 14541, 237, 272115


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def load_triples(data: Path):
    """(edge_index [2, T] head/tail, edge_type [T], num_entities, num_relations, source)."""
    import torch

    if (data / "train.txt").exists():
        entities: dict[str, int] = {}
        relations: dict[str, int] = {}
        for split in ("train", "valid", "test"):
            for line in (data / f"{split}.txt").read_text().splitlines():
                head, rel, tail = line.split("\t")
                entities.setdefault(head, len(entities))
                entities.setdefault(tail, len(entities))
                relations.setdefault(rel, len(relations))
        train = [line.split("\t") for line in (data / "train.txt").read_text().splitlines()]
        heads = torch.tensor([entities[h] for h, _, _ in train])
        tails = torch.tensor([entities[t] for _, _, t in train])
        types = torch.tensor([relations[r] for _, r, _ in train])
        return torch.stack([heads, tails]), types, len(entities), len(relations), str(data)
    gen = torch.Generator().manual_seed(0)
    edge_index = torch.randint(0, ENTITIES, (2, TRAIN_TRIPLES), generator=gen)
    types = torch.randint(0, RELATIONS, (TRAIN_TRIPLES,), generator=gen)
    return edge_index, types, ENTITIES, RELATIONS, "random triples of FB15k-237's sizes"


def measure(impl: str, composition: str, device: str, repeats: int, data: Path) -> dict:
    """Peak MiB of one step and median seconds per step (runs in the child process)."""
    import torch

    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(HERE.parent))
    from compgcn_reference import ReferenceCompGCNConv

    from galfast.nn import CompGCNConv, compgcn_graphs

    edge_index, edge_type, n, num_rels, _ = load_triples(data)
    torch.manual_seed(0)
    if impl == "galfast":
        layer = CompGCNConv(DIM, DIM, num_rels, composition, dropout=0.1, act=torch.tanh)
        layer = layer.to(device)
        graphs = compgcn_graphs(edge_index.to(device), edge_type.to(device), n, num_rels)
        inputs = (graphs, None)
    else:
        layer = ReferenceCompGCNConv(DIM, DIM, num_rels, composition, 0.1, torch.tanh)
        layer = layer.to(device)
        both = torch.cat([edge_index, edge_index.flip(0)], 1).to(device)
        inputs = (both, torch.cat([edge_type, edge_type + num_rels]).to(device))
    x = torch.nn.Parameter(torch.randn(n, DIM, device=device))
    rel = torch.nn.Parameter(torch.randn(2 * num_rels, DIM, device=device))

    def step():
        out, rel_out = layer(x, *inputs, rel)
        (out.sum() + rel_out.sum()).backward()
        layer.zero_grad(set_to_none=True)
        x.grad = rel.grad = None
        if device == "cuda":
            torch.cuda.synchronize()

    step()
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        step()
        peak = (torch.cuda.max_memory_allocated() - before) / 2**20
    else:
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := current VmRSS
        before = _rss_kib("VmRSS")
        step()
        peak = (_rss_kib("VmHWM") - before) / 1024
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return {"peak_mib": peak, "seconds": statistics.median(times)}


def _child(impl: str, composition: str, args) -> dict:
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0")
    command = [sys.executable, __file__, "--child", impl, "--compositions", composition]
    command += ["--device", args.device, "--repeats", str(args.repeats), "--data", str(args.data)]
    done = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--compositions", nargs="+", default=["sub", "mult", "corr"])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--child", choices=["galfast", "reference"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        result = measure(args.child, args.compositions[0], args.device, args.repeats, args.data)
        print(json.dumps(result))
        return
    import torch

    edge_index, _, n, num_rels, source = load_triples(args.data)
    print(
        f"CompGCN layer forward+backward, {source}: {n} entities, {2 * num_rels} relations, "
        f"{2 * edge_index.size(1)} edges + {n} self loops, {DIM} -> {DIM}, {args.device}, "
        f"{torch.get_num_threads()} threads, median of {args.repeats}; load before: "
        f"{os.getloadavg()[0]:.1f}"
    )
    print(
        "| composition | galfast (s) | reference (s) | speed-up | galfast peak (MiB) "
        "| reference peak (MiB) | memory ratio |"
    )
    print("|---|---|---|---|---|---|---|")
    for composition in args.compositions:
        ours = _child("galfast", composition, args)
        theirs = _child("reference", composition, args)
        print(
            f"| {composition} | {ours['seconds']:.3f} | {theirs['seconds']:.3f} "
            f"| {theirs['seconds'] / ours['seconds']:.1f}x | {ours['peak_mib']:.0f} "
            f"| {theirs['peak_mib']:.0f} | {theirs['peak_mib'] / ours['peak_mib']:.1f}x |",
            flush=True,
        )
    print(f"load after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
