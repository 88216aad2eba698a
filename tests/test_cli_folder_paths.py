"""Output folders whose path runs through a file, and an empty --root: one line naming what
the user typed, not an OS error about a path the command made up (``OUT/runs``)."""

from __future__ import annotations

import os

import pytest
from cli_errors_helpers import one_error_line

from galfast.cli import main


@pytest.mark.parametrize("below", ["", "deeper/still"])
def test_sweep_out_through_a_file_names_the_file(tmp_path, capsys, below):
    (tmp_path / "results.json").write_text("{}")
    out = tmp_path / "results.json" / below if below else tmp_path / "results.json"
    assert main(["sweep", "--dataset", "synthetic-graph", "--out", str(out)]) == 2
    line = one_error_line(capsys, "sweep")
    assert line.endswith(f"--out: {tmp_path / 'results.json'} is a file, expected a folder")


def test_sweep_out_a_dangling_symlink_says_so(tmp_path, capsys):
    os.symlink(tmp_path / "gone", tmp_path / "link")
    assert main(["sweep", "--dataset", "synthetic-graph", "--out", str(tmp_path / "link")]) == 2
    assert "is a symlink to nothing, expected a folder" in one_error_line(capsys, "sweep")


def test_an_empty_root_is_refused_as_empty(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--root", ""])
    assert "--root: expected a file or folder name, got an empty one" in one_error_line(
        capsys, "run"
    )
