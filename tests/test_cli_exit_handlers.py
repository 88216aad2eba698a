"""The fast exit of the ``galfast`` entry point still runs the exit handlers Python's exit
would: libraries clean up there (matplotlib removes the temporary config folder it made when
HOME is not writable, which every figure command left in the temporary folder)."""

import os
import subprocess
import sys
import textwrap

from same_galfast import same_galfast_env


def _entry_point(code: str, tmp_path, env: dict) -> subprocess.CompletedProcess:
    """``code`` defines ``main``; it runs as the command of ``run_and_exit``."""
    script = code + "\nimport galfast.cli as cli\ncli.main = main\ncli.run_and_exit()\n"
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )


def test_the_fast_exit_runs_the_exit_handlers(tmp_path):
    done = _entry_point(
        textwrap.dedent(
            """
            import atexit
            def main():
                atexit.register(lambda: open("cleaned", "w").close())
                return 0
            """
        ),
        tmp_path,
        same_galfast_env(),
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "cleaned").exists()


def test_a_figure_without_a_writable_home_leaves_no_folder_and_no_advice(tmp_path):
    (tmp_path / "home").write_text("")  # a file: no config folder can be made under it
    (tmp_path / "tmp").mkdir()
    env = {
        key: value
        for key, value in same_galfast_env().items()
        if key not in ("MPLCONFIGDIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME")
    }
    env.update(HOME=str(tmp_path / "home"), TMPDIR=str(tmp_path / "tmp"))
    done = _entry_point(
        textwrap.dedent(
            """
            from galfast.cli.plots import pyplot
            def main():
                figure = pyplot().figure()
                figure.text(0.5, 0.5, "lambda")  # draws with the fonts, cached in the folder
                figure.savefig("figure.png")
                return 0
            """
        ),
        tmp_path,
        env,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "figure.png").stat().st_size > 0
    assert done.stderr == ""
    assert os.listdir(tmp_path / "tmp") == []
