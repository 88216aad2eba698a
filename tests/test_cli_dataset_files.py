"""No output of a command replaces a file its dataset is read from: ``run --root D --out
D/ind.cora.graph`` wrote its results over a raw file, which the next load failed on. One line,
before any training; an output beside the raw files is taken."""

from __future__ import annotations

import os

import pytest
from cli_errors_helpers import one_error_line, refuse_training
from test_datasets_planetoid import write_planetoid

from galfast.cli import main
from galfast.cli import run as run_module
from galfast.cli import sweep as sweep_module
from galfast.cli import tsne as tsne_module
from galfast.cli.dataset_files import check_spares_the_dataset
from galfast.cli.errors import UsageError
from galfast.cli.files import check_folder_writable, folders_removed_on_failure
from galfast.datasets.bundled import BUNDLED_DIR
from galfast.datasets.planetoid_loader import planetoid_files
from galfast.experiments import ExperimentConfig

pytest.importorskip("matplotlib")

QUICK = ["--dataset", "cora", "--epochs", "1", "--attacker-epochs", "1", "--quiet"]


@pytest.fixture
def root(tmp_path, monkeypatch):
    """A --root folder holding Cora-named raw files; training fails the test."""
    refuse_training(monkeypatch, run_module, sweep_module, tsne_module)
    folder = tmp_path / "data"
    write_planetoid(folder, name="cora")
    return folder


@pytest.mark.parametrize("spelling", ["ind.cora.graph", "sub/../ind.cora.ty", "ind.cora.allx"])
def test_run_out_onto_a_raw_file_is_refused(root, capsys, spelling):
    (root / "sub").mkdir()
    before = {path.name: path.read_bytes() for path in root.glob("ind.cora.*")}
    argv = ["run", *QUICK, "--seeds", "1", "--root", str(root), "--out", str(root / spelling)]
    assert main(argv) == 2
    line = one_error_line(capsys, "run")
    assert f"--out {root / spelling} is the same file as the dataset's file" in line
    assert {path.name: path.read_bytes() for path in root.glob("ind.cora.*")} == before


def test_a_feature_file_the_root_lacks_is_refused_too(root, capsys):
    # Written there, it would be read as the features on the next load.
    (root / "ind.cora.allx").unlink()
    out = root / "ind.cora.allx"
    assert main(["run", *QUICK, "--seeds", "1", "--root", str(root), "--out", str(out)]) == 2
    assert "is the same file as the dataset's file" in one_error_line(capsys, "run")
    assert not out.exists()


def test_sweep_output_linked_to_a_raw_file_is_refused(root, tmp_path, capsys):
    out = tmp_path / "sweep"
    out.mkdir()
    os.symlink(root / "ind.cora.graph", out / "summary.json")
    argv = ["sweep", *QUICK, "--seeds", "1", "--lam", "0", "--distance", "tv"]
    assert main([*argv, "--root", str(root), "--out", str(out)]) == 2
    assert "--out" in one_error_line(capsys, "sweep")


def test_tsne_figure_linked_to_a_raw_file_is_refused(root, tmp_path, capsys):
    os.symlink(root / "ind.cora.tx", tmp_path / "tsne.png")
    argv = ["tsne", *QUICK, "--root", str(root), "--out", str(tmp_path / "tsne.png")]
    assert main(argv) == 2
    assert "is the same file as the dataset's file" in one_error_line(capsys, "tsne")


def test_an_output_beside_the_raw_files_is_taken(root):
    config = ExperimentConfig(dataset="cora", root=str(root))
    check_spares_the_dataset([root / "results.json"], "--out", config)
    # ind.cora.x is not read (allx holds its rows) but is the set's, and PyG reads it.
    for name in ("ind.cora.y", "ind.cora.x"):
        with pytest.raises(UsageError, match="--out .* the dataset's file"):
            check_spares_the_dataset([root / name], "--out", config)


def test_planetoid_files_name_the_source_the_loader_reads(tmp_path, monkeypatch):
    monkeypatch.setenv("GALFAST_DATA", str(tmp_path / "cache"))
    assert planetoid_files("Cora") == (BUNDLED_DIR / "cora.npz",)
    cached = planetoid_files("citeseer")
    assert {path.parent for path in cached} == {tmp_path / "cache" / "planetoid"}
    assert "ind.citeseer.graph" in {path.name for path in cached}
    write_planetoid(tmp_path / "root" / "planetoid", name="pubmed")
    assert {path.parent for path in planetoid_files("pubmed", tmp_path / "root")} == {
        tmp_path / "root" / "planetoid"
    }


def test_a_refused_sweep_leaves_no_folder_it_created(root, tmp_path, capsys):
    # The output checks create --out/runs/ before the dataset loads; the refusal comes after.
    out = tmp_path / "new" / "sweep"
    out.mkdir(parents=True)
    os.symlink(root / "ind.cora.graph", out / "summary.json")
    assert main(["sweep", *QUICK, "--seeds", "1", "--root", str(root), "--out", str(out)]) == 2
    assert "is the same file as the dataset's file" in one_error_line(capsys, "sweep")
    assert sorted(p.name for p in out.iterdir()) == ["summary.json"]


def test_a_run_refused_after_its_checks_leaves_no_folder_they_created(tmp_path, capsys):
    # --out's folders are created when it is checked, before the dataset is looked for.
    empty = tmp_path / "empty"
    empty.mkdir()
    out = tmp_path / "results" / "deep" / "run.json"
    argv = ["run", *QUICK, "--seeds", "1", "--root", str(empty), "--out", str(out)]
    assert main(argv) == 2
    assert "cora" in one_error_line(capsys, "run")
    assert not (tmp_path / "results").exists()


def test_folders_that_hold_a_file_are_kept(tmp_path):
    with pytest.raises(UsageError):
        with folders_removed_on_failure():
            check_folder_writable(tmp_path / "a" / "b", "--out")
            check_folder_writable(tmp_path / "a" / "c", "--out")
            (tmp_path / "a" / "c" / "kept.txt").write_text("")
            raise UsageError("refused")
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["c"]


def test_folders_stay_when_the_command_succeeds(tmp_path):
    with folders_removed_on_failure():
        check_folder_writable(tmp_path / "a" / "b", "--out")
    assert (tmp_path / "a" / "b").is_dir()
