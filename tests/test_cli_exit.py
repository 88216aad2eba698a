"""The ``galfast`` entry point ends the process without the interpreter's teardown once a
command has returned, and only then: the output and the exit status must arrive whole, and a
thread or child process still running must still be waited for. Ctrl-C before the command
runs, while torch still imports, is the command's one line too."""

import os
import subprocess
import sys
import textwrap
import threading

import pytest
from same_galfast import GALFAST_PARENT, same_galfast_env

from galfast.cli import _teardown_needed


def _python(code: str, tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=same_galfast_env(),
        timeout=120,
    )


def test_a_returned_status_and_piped_output_arrive_whole(tmp_path):
    done = _python(
        """
        import sys
        import galfast.cli as cli
        def main():
            print("x" * 200_000)  # far past a pipe's buffer: only a flush sends the rest
            print("to stderr", file=sys.stderr, end="")
            return 3
        cli.main = main
        cli.run_and_exit()
        """,
        tmp_path,
    )
    assert done.returncode == 3
    assert done.stdout == "x" * 200_000 + "\n"
    assert done.stderr == "to stderr"


@pytest.mark.parametrize(
    "start",
    [
        "threading.Thread(target=late).start()",
        'multiprocessing.get_context("fork").Process(target=late).start()',
    ],
    ids=["thread", "child process"],
)
def test_a_running_thread_or_child_is_still_waited_for(tmp_path, start):
    done = _python(
        f"""
        import multiprocessing, threading, time
        import galfast.cli as cli
        def late():
            time.sleep(0.5)
            open("written", "w").close()
        def main():
            {start}
            return 0
        cli.main = main
        cli.run_and_exit()
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "written").exists()


def test_a_usage_error_still_prints_one_line_and_exits_2(tmp_path):
    missing = str(tmp_path / "missing")
    done = subprocess.run(
        [sys.executable, "-m", "galfast", "run", "--dataset", "cora", "--root", missing],
        capture_output=True,
        text=True,
        cwd=GALFAST_PARENT,
        env=same_galfast_env(),
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("galfast run: error:")


def test_teardown_is_needed_while_a_non_daemon_thread_runs():
    assert not _teardown_needed()
    release = threading.Event()
    worker = threading.Thread(target=release.wait)
    worker.start()
    try:
        assert _teardown_needed()
    finally:
        release.set()
        worker.join()
    daemon = threading.Thread(target=release.wait, daemon=True)
    release.clear()
    daemon.start()
    try:
        assert not _teardown_needed()
    finally:
        release.set()
        daemon.join()


# Loaded at start-up (sitecustomize, from PYTHONPATH): Ctrl-C arrives as torch starts importing,
# before galfast.cli exists.
_INTERRUPT_AT_TORCH = """
import os, signal, sys

class InterruptAtTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch":
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, InterruptAtTorch())
"""


def _interrupted_at_import(tmp_path, command: list[str]) -> subprocess.CompletedProcess:
    (tmp_path / "sitecustomize.py").write_text(_INTERRUPT_AT_TORCH)
    env = same_galfast_env()
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env["PYTHONPATH"]])
    return subprocess.run(
        command, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120
    )


@pytest.mark.parametrize("script", [False, True], ids=["python -m galfast", "galfast script"])
def test_an_interrupt_while_torch_imports_is_one_line(tmp_path, script):
    # Was a KeyboardInterrupt traceback from inside torch's import.
    entry = tmp_path / "galfast"  # what pip writes for pyproject's console script
    entry.write_text("import sys\nfrom galfast.cli import run_and_exit\nsys.exit(run_and_exit())\n")
    start = [sys.executable, str(entry)] if script else [sys.executable, "-m", "galfast"]
    done = _interrupted_at_import(tmp_path, [*start, "audit", "z.pt", "--labels", "a.pt"])
    assert (done.returncode, done.stderr) == (130, "galfast audit: interrupted\n")


def test_a_program_importing_galfast_keeps_its_keyboard_interrupt(tmp_path):
    done = _interrupted_at_import(tmp_path, [sys.executable, "-c", "import galfast"])
    assert done.returncode != 0 and "KeyboardInterrupt" in done.stderr
