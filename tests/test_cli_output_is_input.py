"""An output path that is one of the command's own inputs (by another spelling, a symlink or a
hard link) is refused in one line before any work: the write would replace the file just
read."""

from __future__ import annotations

import os

import pytest
from cli_errors_helpers import one_error_line

from galfast.cli import main
from galfast.cli.errors import UsageError


def audit_argv(folder, json_path):
    return [
        "audit",
        str(folder / "z.pt"),
        "--labels",
        str(folder / "labels.pt"),
        "--graph",
        str(folder / "g.pt"),
        "--quiet",
        "--json",
        str(json_path),
    ]


@pytest.mark.parametrize(
    ("spelling", "named"),
    [
        ("z.pt", "EMBEDDINGS"),
        ("sub/../labels.pt", "--labels"),
        ("g.pt", "--graph"),
        ("link.pt", "EMBEDDINGS"),
        ("hard.pt", "EMBEDDINGS"),
    ],
)
def test_audit_json_onto_an_input_is_refused(audit_files, capsys, monkeypatch, spelling, named):
    from galfast.cli import audit_cmd

    (audit_files / "sub").mkdir()
    os.symlink(audit_files / "z.pt", audit_files / "link.pt")
    os.link(audit_files / "z.pt", audit_files / "hard.pt")
    monkeypatch.setattr(audit_cmd, "audit", None)  # a call would fail the test
    before = (audit_files / "z.pt").read_bytes()
    assert main(audit_argv(audit_files, audit_files / spelling)) == 2
    line = one_error_line(capsys, "audit")
    assert f"--json {audit_files / spelling} is the same file as {named}" in line
    assert (audit_files / "z.pt").read_bytes() == before


def test_an_output_beside_the_inputs_is_taken(tmp_path):
    from galfast.cli.files import check_not_an_input

    (tmp_path / "in.pt").write_bytes(b"x")
    check_not_an_input(tmp_path / "out.json", "--json", {"EMBEDDINGS": tmp_path / "in.pt"})
    check_not_an_input(tmp_path / "in.pt", "--json", {"--graph": None})
    with pytest.raises(UsageError, match="same file as EMBEDDINGS"):
        check_not_an_input(tmp_path / "in.pt", "--json", {"EMBEDDINGS": tmp_path / "in.pt"})
