"""Per-call time and minor page faults of the CPU aggregation on a PubMed-size graph, in several
fresh processes per checkout (whether freed buffers go back to the system, and so are faulted
in again on the next call, depends on each process's heap: docs/benchmarks.md, session 13):

    python bench/aggregate_page_faults.py /tmp/before . --processes 8

Each process (one thread, the checkout's in-place build) times 200 calls of
``aggregate(g, x, norm="gcn")`` at F = 16, without and with ``.backward(ones)``, after one
warm-up call, and reads ``resource.getrusage`` around them.
"""

from __future__ import annotations

import argparse
import os

from checkout_runs import json_from_checkout

_MEASURE = """
import json, resource, sys, time, torch
sys.path.insert(0, {bench!r})
torch.set_num_threads(1)
from graphs import pubmed_like
from galfast import Graph
from galfast.ops import aggregate
edge_index, n = pubmed_like()
g = Graph.from_edge_index(edge_index, n)
x = torch.randn(n, 16, requires_grad=True)
ones = torch.ones(n, 16)
result = {{}}
for name, call in (("fwd", lambda: aggregate(g, x.detach(), norm="gcn")),
                   ("fwd+bwd", lambda: aggregate(g, x, norm="gcn").backward(ones))):
    call()
    before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for _ in range(200):
        call()
    after = resource.getrusage(resource.RUSAGE_SELF)
    seconds, faults = time.perf_counter() - start, after.ru_minflt - before.ru_minflt
    result[name] = (seconds / 200 * 1e3, faults / 200)
print(json.dumps(result))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkouts", nargs="+")
    parser.add_argument("--processes", type=int, default=8)
    args = parser.parse_args()
    code = _MEASURE.format(bench=os.path.dirname(os.path.abspath(__file__)))
    for _ in range(args.processes):
        for checkout in args.checkouts:
            r = json_from_checkout(checkout, code)
            cells = "  ".join(f"{k} {ms:.2f} ms ({n:.0f} faults)" for k, (ms, n) in r.items())
            print(f"{checkout}: {cells}", flush=True)


if __name__ == "__main__":
    main()
