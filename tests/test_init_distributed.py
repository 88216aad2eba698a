"""init_distributed under torchrun's variables as users get them wrong: a timeout that is no
duration, variables missing, peers that never join (a TimeoutError naming the process and the
address, after the given timeout rather than torch's 30 minutes), and a world of one."""

from __future__ import annotations

import datetime
import json
import socket
import subprocess
import sys
import textwrap

import pytest
import torch.distributed
from same_galfast import GALFAST_PARENT, same_galfast_env

from galfast.train import init_distributed


@pytest.fixture
def no_rendezvous(monkeypatch):
    """Fails a test that reaches torch's rendezvous, which would wait 30 minutes for peers."""

    def reached(*args, **kwargs):
        raise AssertionError("init_distributed reached the rendezvous")

    monkeypatch.setattr(torch.distributed, "init_process_group", reached)


@pytest.mark.usefixtures("no_rendezvous")
@pytest.mark.parametrize("timeout", ["10", True, -1, 0, float("nan"), datetime.timedelta(0)])
def test_a_timeout_that_is_no_positive_duration_is_refused(timeout):
    with pytest.raises(ValueError, match="timeout must be"):
        init_distributed(timeout=timeout)


@pytest.mark.usefixtures("no_rendezvous")
def test_missing_launch_variables_are_named_together(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    monkeypatch.delenv("MASTER_PORT", raising=False)
    with pytest.raises(ValueError, match="MASTER_ADDR, MASTER_PORT are not"):
        init_distributed()


@pytest.mark.parametrize(
    "variables, named",
    [({"RANK": "one"}, "RANK must be"), ({"RANK": "2"}, r"RANK must lie in \[0, WORLD_SIZE\)")],
)
@pytest.mark.usefixtures("no_rendezvous")
def test_launch_variables_that_are_no_rank_are_refused(monkeypatch, variables, named):
    environment = {"WORLD_SIZE": "2", "RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}
    for name, value in {**environment, **variables}.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=named):
        init_distributed()


# Run in a fresh interpreter: a process group is global state, and a timeout that a regression
# ignored would wait 30 minutes (the subprocess's own timeout fails the test instead).
_SCRIPT = """
import json, os, torch, torch.distributed as dist
from galfast import GALTrainer
from galfast.train import init_distributed

def joining(rank, world_size, port):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world_size), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port), LOCAL_RANK="0")
    try:
        return str(init_distributed(timeout=2))
    except TimeoutError as error:
        return f"TimeoutError: {error}"

ports = json.loads(os.environ["PORTS"])
result = {"client": joining(1, 2, ports[0]), "server": joining(0, 2, ports[1])}
result["alone"] = joining(0, 1, ports[2])
trainer = GALTrainer(torch.nn.Linear(3, 2), lambda z, b: z, task_loss=lambda out, b: out.sum(),
                     lam=0.0)
result["trainer world size"] = trainer.process_group.world_size
result["group"] = dist.get_world_size()
print(json.dumps(result))
"""


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


@pytest.fixture(scope="module")
def joined():
    environment = {"PORTS": json.dumps(_free_ports(3)), "GLOO_SOCKET_IFNAME": "lo"}
    completed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_SCRIPT)],
        cwd=GALFAST_PARENT,  # from a checkout, not its unbuilt source tree
        env={**same_galfast_env(), **environment},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("rank, side", [(1, "client"), (0, "server")])
def test_peers_that_never_join_raise_a_timeout_naming_this_process(joined, rank, side):
    message = joined[side]
    assert message.startswith(f"TimeoutError: process {rank} of 2 could not join")
    assert "at 127.0.0.1:" in message and "waited up to 0:00:02" in message


def test_a_world_of_one_under_torchrun_trains_as_one_process(joined):
    assert joined["alone"] == "cpu"
    assert joined["group"] == 1 and joined["trainer world size"] == 1
