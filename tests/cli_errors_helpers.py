"""Shared by the tests of the CLI's one-line errors: the error line itself, and a guard that
fails a test when a command starts training before it found the mistake."""

from __future__ import annotations


def one_error_line(capsys, command: str) -> str:
    """The one line ``galfast <command>`` printed to stderr for a user's mistake."""
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"galfast {command}: error: "), err
    assert "Traceback" not in err
    return lines[0]


def refuse_training(monkeypatch, *modules) -> None:
    """Makes ``run_experiment`` in each of ``modules`` fail the test: the error must come
    first."""

    def refuse(*args, **kwargs):
        raise AssertionError("training started before the error was found")

    for module in modules:
        monkeypatch.setattr(module, "run_experiment", refuse)
