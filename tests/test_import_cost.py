"""`import galfast` and the CLI's help load no heavy optional dependency: scikit-learn (with the
scipy.stats and pandas it imports) and scipy load with the first strong (classic) attacker or
Planetoid file, not with the package (together about a second of start-up)."""

from __future__ import annotations

import json
import os

import pytest
from same_galfast import run_python

HEAVY = ("sklearn", "scipy", "pandas", "matplotlib", "torch_geometric")

_LOADED = """
import json, sys
{body}
print(json.dumps(sorted({{m.split(".")[0] for m in sys.modules}} & set({heavy!r}))))
"""


def _heavy_modules_after(body: str) -> list[str]:
    out = run_python(_LOADED.format(body=body, heavy=HEAVY))
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "body",
    [
        "import galfast",
        "import galfast.experiments, galfast.audit, galfast.datasets",
        # What `python -m galfast --help` runs: the parser with every subcommand.
        "import runpy; sys.argv = ['galfast', '--help']\n"
        "try:\n    runpy.run_module('galfast', run_name='__main__')\nexcept SystemExit:\n    pass",
    ],
    ids=["import", "subpackages", "cli-help"],
)
def test_start_up_loads_no_heavy_dependency(body):
    assert _heavy_modules_after(body) == []


def test_heavy_dependencies_still_load_where_used():
    # The lazy imports are real imports: the first classic attacker and the first Planetoid
    # read load them (a missing scikit-learn fails there, by name).
    body = (
        "import numpy as np\n"
        "from galfast.audit.classic import fit_classic\n"
        "from galfast.audit.metrics import primary_metric\n"
        "x, y = np.random.default_rng(0).normal(size=(30, 2)), np.arange(30) % 2\n"
        "fit_classic('knn', 'binary', x[:20], y[:20], x[20:25], y[20:25], x[25:], seed=0,\n"
        "            score=lambda t, p: primary_metric('binary', t, p))\n"
        "from galfast.datasets import planetoid\n"
        "planetoid('cora')"
    )
    assert {"sklearn", "scipy"} <= set(_heavy_modules_after(body))


def test_metrics_and_the_fast_audit_load_no_heavy_dependency():
    # The audit's metrics are numpy: an audit without the classic attackers never loads
    # scikit-learn (about a second); scipy only for the t intervals of several seeds.
    body = (
        "import torch\n"
        "from galfast import SensitiveAttribute, audit\n"
        "gen = torch.Generator().manual_seed(0)\n"
        "z = torch.randn(120, 4, generator=gen)\n"
        "a = SensitiveAttribute('a', 'binary', (z[:, 0] > 0).long())\n"
        "audit(z, a, train_idx=torch.arange(90), test_idx=torch.arange(90, 120),\n"
        "      attacks=('node',), seeds=1, epochs=1, min_steps=1, workers=1)"
    )
    assert _heavy_modules_after(body) == []


_POOLS_DURING_FITS = """
import json, sys
import threadpoolctl, torch
import galfast
from galfast import SensitiveAttribute, audit
strong_attacks = sys.modules["galfast.audit.strong_attacks"]
seen = []
fit_classic = strong_attacks.fit_classic
def recording_fit_classic(*args, **kwargs):
    seen.extend(info["num_threads"] for info in threadpoolctl.threadpool_info())
    return fit_classic(*args, **kwargs)
strong_attacks.fit_classic = recording_fit_classic
assert "sklearn" not in sys.modules
gen = torch.Generator().manual_seed(0)
z = torch.randn(200, 4, generator=gen)
gender = SensitiveAttribute("g", "binary", (z[:, 0] > 0).long())
audit(z, gender, train_idx=torch.arange(150), test_idx=torch.arange(150, 200),
      attacks=("node",), strength="strong", threads=1, workers=1, epochs=1, min_steps=1)
print(json.dumps(seen))
"""


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="pools default to one thread here")
def test_scikit_learns_pools_are_limited_though_it_loads_in_the_audit():
    # scikit-learn's OpenMP and BLAS libraries load with it, inside the audit now: they must
    # load before the audit limits the pools, or k-NN and the trees run on every core.
    out = run_python(_POOLS_DURING_FITS)
    threads = json.loads(out.stdout.strip().splitlines()[-1])
    assert threads and set(threads) == {1}
