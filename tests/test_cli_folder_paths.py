"""Output paths that name a folder or run through a file or a symlink to nothing, and a --root
that is empty or a file: one line naming what the user typed, not an OS error about a path the
command made up (``OUT/runs``) nor a folder made where the link points."""

from __future__ import annotations

import os

import pytest
from cli_errors_helpers import one_error_line, refuse_training

from galfast.cli import main
from galfast.cli import run as run_module
from galfast.cli import tsne as tsne_module

# The commands that write one output file.
run_and_tsne = pytest.mark.parametrize(
    "command",
    [["run", "--dataset", "synthetic-graph"], ["tsne", "--dataset", "synthetic-graph"]],
    ids=["run", "tsne"],
)


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


@run_and_tsne
def test_an_output_file_in_a_dangling_symlink_folder_is_refused(
    tmp_path, capsys, monkeypatch, command
):
    refuse_training(monkeypatch, run_module, tsne_module)
    # run made the link's missing target and wrote there, where sweep refused the same path.
    os.symlink(tmp_path / "gone", tmp_path / "link")
    assert main([*command, "--out", str(tmp_path / "link" / "x.png")]) == 2
    line = one_error_line(capsys, command[0])
    assert line.endswith(f"--out: {tmp_path / 'link'} is a symlink to nothing, expected a folder")
    assert not (tmp_path / "gone").exists()


@run_and_tsne
def test_an_output_file_that_links_into_a_missing_folder_is_refused(
    tmp_path, capsys, monkeypatch, command
):
    refuse_training(monkeypatch, run_module, tsne_module)
    # The link's target folder was created, a place the user never typed.
    suffix = ".png" if command[0] == "tsne" else ".json"
    os.symlink(tmp_path / "gone" / f"x{suffix}", tmp_path / f"link{suffix}")
    assert main([*command, "--out", str(tmp_path / f"link{suffix}")]) == 2
    line = one_error_line(capsys, command[0])
    assert line.endswith("whose folder does not exist; create it or name another file")
    assert not (tmp_path / "gone").exists()


def test_tsne_out_a_folder_says_so(tmp_path, capsys, monkeypatch):
    refuse_training(monkeypatch, tsne_module)
    # Was the list of figure suffixes, as though a suffix were what was wrong.
    assert main(["tsne", "--dataset", "synthetic-graph", "--out", str(tmp_path)]) == 2
    assert one_error_line(capsys, "tsne").endswith(
        f"--out: {tmp_path} is a folder, expected a file name"
    )


def test_tsne_out_empty_is_refused_as_empty(capsys, monkeypatch):
    refuse_training(monkeypatch, tsne_module)
    with pytest.raises(SystemExit):
        main(["tsne", "--out", ""])
    assert "--out: expected a file or folder name, got an empty one" in one_error_line(
        capsys, "tsne"
    )


def test_a_root_naming_a_raw_file_says_it_is_a_file(tmp_path, capsys):
    # Was "no such folder" for a file that exists.
    (tmp_path / "ind.cora.graph").write_bytes(b"")
    assert main(["run", "--root", str(tmp_path / "ind.cora.graph"), "--quiet"]) == 2
    assert one_error_line(capsys, "run").endswith("is a file, expected the folder holding it")


_TOO_LONG = "a" * 300  # past NAME_MAX (255 on Linux)


@pytest.mark.parametrize(
    "command, out",
    [
        (["run", "--dataset", "synthetic-graph", "--out"], f"{_TOO_LONG}.json"),
        (["run", "--dataset", "synthetic-graph", "--out"], f"{_TOO_LONG}/r.json"),
        (["tsne", "--dataset", "synthetic-graph", "--out"], f"{_TOO_LONG}.png"),
        (["demo", "--out"], _TOO_LONG),
        (["sweep", "--dataset", "synthetic-graph", "--out"], _TOO_LONG),
    ],
    ids=["run", "run-folder", "tsne", "demo", "sweep"],
)
def test_an_output_name_too_long_for_the_system_is_one_line(
    tmp_path, capsys, monkeypatch, command, out
):
    # Path.is_dir raised ENAMETOOLONG: a traceback, status 1.
    refuse_training(monkeypatch, run_module, tsne_module)
    monkeypatch.chdir(tmp_path)
    assert main([*command, out]) == 2
    line = one_error_line(capsys, command[0])
    assert "--out" in line and ("too long" in line or "cannot create" in line)


def test_an_audit_json_name_too_long_is_one_line(audit_files, capsys, monkeypatch):
    from galfast.cli import audit_cmd

    monkeypatch.setattr(audit_cmd, "audit", None)  # a call would fail the test
    argv = ["audit", str(audit_files / "z.pt"), "--labels", str(audit_files / "labels.pt")]
    assert main([*argv, "--json", str(audit_files / f"{_TOO_LONG}.json")]) == 2
    assert "--json" in one_error_line(capsys, "audit")
