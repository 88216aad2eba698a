"""The CUDA sum kernels side by side in one run: galfast's segment kernel at several segment
lengths, its row-and-hub kernel (the path without a plan) and the peers, cuSPARSE through
``torch.sparse.mm`` (int64 and int32 CSR) and ``cupyx.scipy.sparse`` (int32 CSR), forward
``out = A x`` with GCN weights on the PubMed-size and MovieLens-size graphs.

    python bench/aggregate_cuda_kernels.py [--features 16 20 64 128] [--json out.json]

Two times per case, both the median of several repeats:
- ``device``: GPU time per call from replaying a CUDA graph of 20 calls (no host cost; the
  kernel's own speed), for galfast and torch (cupy cannot be captured in torch's graph);
- ``call``: wall time per call of 200 back-to-back eager calls and one synchronize (what a
  user's loop pays, host launch cost included).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import warnings

import torch
from graphs import movielens_like, pubmed_like

from galfast import Graph
from galfast._native import _C
from galfast.ops.aggregate import int32_index, launch_aggregate
from galfast.ops.segment_plan import build_segment_plan, segment_edges

GRAPHS = {"pubmed": pubmed_like, "movielens": movielens_like}
SEG_EDGES = [32, 64, 128, 256, 512, 1024]
_SUM = int(_C.AggMode.SUM)


def csr(g: Graph, weight: torch.Tensor, index_dtype: torch.dtype) -> torch.Tensor:
    with warnings.catch_warnings():  # torch calls its sparse CSR support beta
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(
            g.rowptr.to(index_dtype),
            g.col.to(index_dtype),
            weight,
            (g.num_nodes, g.num_nodes),
        )


def implementations(g: Graph, weight: torch.Tensor) -> dict:
    scale = g.degree_scale("gcn", torch.float32)
    col32 = int32_index(g, "col", g.col)
    hubs = g.hub_rows()

    def galfast(plan):
        return lambda x: launch_aggregate(
            g.rowptr, g.col, col32, None, None, scale, scale, hubs, plan, x, None, _SUM
        )[0]

    impls = {"galfast rows+hubs (no plan)": galfast(None)}
    default = segment_edges(g.num_edges, g.device)
    for length in SEG_EDGES:
        name = f"galfast segments L={length}" + (" (default)" if length == default else "")
        impls[name] = galfast(build_segment_plan(g.rowptr, length))
    a64, a32 = csr(g, weight, torch.int64), csr(g, weight, torch.int32)
    impls["torch.sparse.mm int64"] = lambda x: torch.sparse.mm(a64, x)
    impls["torch.sparse.mm int32"] = lambda x: torch.sparse.mm(a32, x)
    try:
        import cupy
        import cupyx.scipy.sparse as cusparse

        a_cupy = cusparse.csr_matrix(
            (cupy.asarray(weight), cupy.asarray(g.col.int()), cupy.asarray(g.rowptr.int())),
            shape=(g.num_nodes, g.num_nodes),
        )
        impls["cupyx.scipy.sparse int32"] = lambda x: torch.as_tensor(a_cupy @ cupy.asarray(x))
    except ImportError:
        pass
    return impls


def device_time(fn, x, calls: int = 20, repeats: int = 7) -> float:
    """Microseconds of GPU time per call, from CUDA-graph replays."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn(x)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn(x)
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000 / calls)
    return statistics.median(times)


def call_time(fn, x, calls: int = 200, repeats: int = 5) -> float:
    """Microseconds of wall time per eager call."""
    for _ in range(5):
        fn(x)
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn(x)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e6 / calls)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--features", type=int, nargs="+", default=[16, 20, 64, 128])
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    rows = []
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}")
    for graph_name, make in GRAPHS.items():
        edge_index, n = make()
        g = Graph.from_edge_index(edge_index, n).to("cuda")
        scale = g.degree_scale("gcn", torch.float32)
        weight = scale[g.row] * scale[g.col]
        impls = implementations(g, weight)
        for f in args.features:
            x = torch.randn(n, f, device="cuda")
            want = torch.sparse.mm(csr(g, weight, torch.int64), x)
            for name, fn in impls.items():
                torch.testing.assert_close(fn(x), want, rtol=1e-4, atol=1e-4)
                device = None if name.startswith("cupyx") else device_time(fn, x)
                row = {"graph": graph_name, "F": f, "impl": name, "device_us": device}
                row["call_us"] = call_time(fn, x)
                rows.append(row)
                shown = "-" if device is None else f"{device:8.1f}"
                print(
                    f"{graph_name:9s} F={f:<4d} {name:34s} device {shown:>8s} us"
                    f"  call {row['call_us']:8.1f} us",
                    flush=True,
                )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
