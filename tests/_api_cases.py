"""Runs cases of the public API described as JSON, one per line on stdin, and prints one line
per case: ``start <i>`` before it, then ``<i> ok`` or ``<i> <ExceptionType> <message>``. Used
by test_api_fuzz.py in a subprocess, so a crash (a signal) is a test failure that names the
case, not a dead test run."""

import json
import sys

import torch

from galfast import Graph
from galfast.nn import GATConv, GCNConv
from galfast.ops import aggregate, gat_aggregate, nnconv_aggregate, sample_nhop

DTYPES = {"int64": torch.int64, "int32": torch.int32, "float32": torch.float32, "bool": torch.bool}


class Unbuildable(Exception):
    """The case's own tensors cannot be made (e.g. 2^40 as int32): reported as "skip"."""


def _tensor(values, dtype=None):
    try:
        return torch.tensor(values, dtype=None if dtype is None else DTYPES[dtype])
    except (RuntimeError, OverflowError) as error:
        raise Unbuildable(str(error)) from None


# Edge lists that would give a graph with more nodes than this are not built: from_edge_index
# allocates O(num_nodes) arrays (as do the harness's inputs), which can take more memory than
# the machine has, and the kernel's OOM kill is a SIGKILL the harness cannot tell from a crash.
# num_nodes of 2^60 or more stays in: Graph refuses it before allocating anything. (A Graph
# built from rowptr is as small as its rowptr.)
MAX_NODES = 2**22
REFUSED_NUM_NODES = 2**60


def _check_size(spec):
    declared = spec["num_nodes"]
    if isinstance(declared, int) and MAX_NODES < declared < REFUSED_NUM_NODES:
        raise Unbuildable(f"num_nodes above {MAX_NODES}")
    if any(MAX_NODES <= i < REFUSED_NUM_NODES for i in spec["edge_index"]):
        raise Unbuildable(f"node ids above {MAX_NODES}")


def _graph(spec):
    if "edge_index" in spec:
        _check_size(spec)
        return Graph.from_edge_index(
            _tensor(spec["edge_index"], spec["dtype"]).view(2, -1),
            spec["num_nodes"],
            None if spec["edge_weight"] is None else _tensor(spec["edge_weight"]),
            edge_type=None if spec["edge_type"] is None else _tensor(spec["edge_type"]),
            symmetrize=spec["symmetrize"],
        )
    return Graph(
        _tensor(spec["rowptr"], spec["dtype"]),
        _tensor(spec["col"], spec["dtype"]),
        spec["num_nodes"],
        None if spec["edge_weight"] is None else _tensor(spec["edge_weight"]),
    )


def _call(case, graph):
    n, args = graph.num_nodes, case["args"]
    torch.manual_seed(0)
    op = case["op"]
    if op == "aggregate":
        x = torch.randn(max(n + args["extra_rows"], 0), args["features"], requires_grad=True)
        w = args["weight"]
        w = None if w is None else _tensor(w).requires_grad_()
        out = aggregate(graph, x, w, reduce=args["reduce"], norm=args["norm"])
        out.sum().backward()
    elif op == "gat":
        heads = args["heads"]
        h = torch.randn(n, heads, args["features"], requires_grad=True)
        a_src = torch.full((n, heads), args["logit"], requires_grad=True)
        a_dst = torch.zeros(n, args["dst_heads"], requires_grad=True)
        out = gat_aggregate(
            graph,
            h,
            a_src,
            a_dst,
            dropout=args["dropout"],
            seed=args["seed"],
            negative_slope=args["slope"],
        )
        out.sum().backward()
    elif op == "nnconv":
        f_in, hidden = args["features"], args["hidden"]
        x = torch.randn(n, f_in, requires_grad=True)
        h = torch.randn(graph.num_edges + args["extra_rows"], hidden, requires_grad=True)
        w = torch.randn(f_in * args["out"] + args["extra_rows"], hidden, requires_grad=True)
        b = torch.randn(w.size(0), requires_grad=True) if args["bias"] else None
        out = nnconv_aggregate(graph, x, h, w, b, reduce=args["reduce"])
        out.sum().backward()
    elif op == "walk":
        sample_nhop(
            graph,
            _tensor(args["starts"], "int64"),
            args["hops"],
            seed=args["seed"],
            mode=args["mode"],
            max_retries=args["max_retries"],
            return_paths=True,
            walk_offset=args["walk_offset"],
        )
    elif op in ("gcn", "gat_conv"):
        layer = GCNConv(3, 2) if op == "gcn" else GATConv(3, 2, heads=2)
        edge_index = graph.edge_index()
        x = torch.randn(n, 3)
        layer(x, edge_index)
        edge_index.data[0, : args["edit"]] = _tensor(args["value"], "int64")
        layer(x, edge_index)


def run(case):
    graph = _graph(case["graph"])
    edit = case.get("edit")
    if edit:
        if edit["warm"]:
            try:
                _call(case, graph)
            except (ValueError, TypeError):
                pass
        target = getattr(graph, edit["field"])
        if target.numel():
            target.data[edit["index"] % target.numel()] = _tensor(edit["value"], "int64")
    _call(case, graph)


def _out_of_memory(error: Exception) -> bool:
    return isinstance(error, RuntimeError) and any(
        text in str(error) for text in ("not enough memory", "can't allocate")
    )


def main():
    for i, line in enumerate(sys.stdin):
        print(f"start {i}", flush=True)
        try:
            run(json.loads(line))
            print(f"{i} ok", flush=True)
        except Unbuildable:
            print(f"{i} skip", flush=True)
        except Exception as error:  # reported, and judged by the test
            if _out_of_memory(error):  # asking for more memory than there is: not a bug
                print(f"{i} skip", flush=True)
                continue
            message = str(error).splitlines()[0] if str(error) else ""
            print(f"{i} {type(error).__name__} {message}", flush=True)


if __name__ == "__main__":
    main()
