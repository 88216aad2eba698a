"""No output of a command replaces a file of its dataset, whatever the dataset: before, only
Planetoid's were known, and ``run --dataset wn18rr --root D --out D/wn18rr/train.txt`` wrote
its results over the triples it had just read (MovieLens, FB15k-237 and QM9 likewise, QM9's
processed cache too). One line naming the option and the file, before any training; the
dataset's files unchanged."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_errors_helpers import one_error_line, refuse_training
from kg_fixtures import pin_folder, write_fb15k_237, write_wn18rr
from qm9_fixture import write_canonical
from test_datasets_movielens import write_ml1m, write_ml100k

from galfast.cli import main
from galfast.cli import run as run_module
from galfast.cli import sweep as sweep_module
from galfast.cli import tsne as tsne_module
from galfast.cli.dataset_files import dataset_files
from galfast.datasets import DATASET_NAMES, KG_NAMES, qm9
from galfast.experiments import ExperimentConfig

QUICK = ["--seeds", "1", "--epochs", "1", "--attacker-epochs", "1", "--quiet"]
QM9_OPTIONS = ["--option", "source=canonical", "--option", "download=False"]


def _movielens(root: Path, monkeypatch) -> None:
    write_ml1m(root / "ml-1m")
    write_ml100k(root / "ml-100k")


def _knowledge_graphs(root: Path, monkeypatch) -> None:
    pin_folder(monkeypatch, "wn18rr", write_wn18rr(root / "wn18rr"))
    pin_folder(monkeypatch, "fb15k-237", write_fb15k_237(root / "fb15k-237"))


def _qm9(root: Path, monkeypatch) -> None:
    write_canonical(root)
    qm9(root, source="canonical", download=False)  # writes the processed cache beside them


# dataset -> (writes its files under a root, options, files a run must spare)
DATASETS = {
    "movielens-1m": (_movielens, [], ["ml-1m/ratings.dat", "ml-1m/users.dat", "ml-1m/movies.dat"]),
    "movielens-100k": (_movielens, [], ["ml-100k/u.data", "ml-100k/u.user", "ml-100k/u.item"]),
    "wn18rr": (
        _knowledge_graphs,
        ["--encoder", "compgcn"],
        ["wn18rr/train.txt", "wn18rr/entity_pos_sense.tsv", "wn18rr/test.txt"],
    ),
    "fb15k-237": (
        _knowledge_graphs,
        ["--encoder", "compgcn", "--option", "top_types=3"],
        ["fb15k-237/entity_types/Entity_Type_train.txt", "fb15k-237/valid.txt"],
    ),
    "qm9": (
        _qm9,
        ["--encoder", "mpnn", "--audit", "fast", *QM9_OPTIONS],
        ["gdb9.sdf", "qm9_canonical_v1.npz", "gdb9.sdf.csv", "uncharacterized.txt"],
    ),
}

# How an output may name a file: itself, another spelling, a symlink or a hard link to it.
SPELLINGS = ("plain", "dot", "dotdot", "symlink", "hard link")


def _spelled(file: Path, spelling: str, elsewhere: Path) -> Path:
    if spelling == "plain":
        return file
    if spelling == "dot":
        return Path(f"{file.parent}/./{file.name}")
    if spelling == "dotdot":
        (file.parent / "sub").mkdir(exist_ok=True)
        return Path(f"{file.parent}/sub/../{file.name}")
    link = elsewhere / f"{spelling.replace(' ', '-')}.json"
    if spelling == "symlink":
        os.symlink(file, link)
    else:
        os.link(file, link)
    return link


def _contents(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture(autouse=True)
def no_training(monkeypatch):
    refuse_training(monkeypatch, run_module, sweep_module, tsne_module)


@pytest.mark.parametrize("spelling", SPELLINGS)
@pytest.mark.parametrize("dataset", DATASETS)
def test_run_out_onto_a_file_of_the_dataset_is_refused(
    tmp_path, monkeypatch, capsys, dataset, spelling
):
    write, options, names = DATASETS[dataset]
    root, elsewhere = tmp_path / "data", tmp_path / "results"
    elsewhere.mkdir()
    write(root, monkeypatch)
    file = root / names[SPELLINGS.index(spelling) % len(names)]
    before = _contents(root)
    out = _spelled(file, spelling, elsewhere)
    argv = ["run", "--dataset", dataset, "--root", str(root), *options, *QUICK]
    assert main([*argv, "--out", str(out)]) == 2
    line = one_error_line(capsys, "run")
    assert f"--out {out} is the same file as the dataset's file {file}" in line
    assert _contents(root) == before


def test_run_out_beside_the_files_is_taken_up_to_training(tmp_path, monkeypatch):
    # The refusal is of the dataset's files only: the run gets as far as training.
    _knowledge_graphs(tmp_path, monkeypatch)
    argv = ["run", "--dataset", "wn18rr", "--root", str(tmp_path), "--encoder", "compgcn"]
    with pytest.raises(AssertionError, match="training started"):
        main([*argv, *QUICK, "--out", str(tmp_path / "wn18rr" / "results.json")])


CACHED = {
    # dataset -> (writes its files into the cache $GALFAST_DATA, options, a file to spare)
    "movielens-1m": (lambda cache, mp: write_ml1m(cache / "ml-1m"), [], "ml-1m.zip"),
    "wn18rr": (
        lambda cache, mp: pin_folder(mp, "wn18rr", write_wn18rr(cache / "wn18rr")),
        ["--encoder", "compgcn"],
        "wn18rr/WN18RR.zip",
    ),
    "qm9": (
        lambda cache, mp: write_canonical(cache / "qm9" / "raw"),
        ["--encoder", "mpnn", "--audit", "fast", *QM9_OPTIONS],
        "qm9/qm9_canonical_v1.npz",
    ),
}


@pytest.mark.parametrize("dataset", CACHED)
def test_a_file_the_loader_writes_into_its_cache_is_spared(tmp_path, monkeypatch, capsys, dataset):
    # The archive a download would put there, or the processed cache the load wrote.
    write, options, name = CACHED[dataset]
    cache = tmp_path / "cache"
    monkeypatch.setenv("GALFAST_DATA", str(cache))
    write(cache, monkeypatch)
    argv = ["run", "--dataset", dataset, *options, *QUICK, "--out", str(cache / name)]
    assert main(argv) == 2
    assert f"is the same file as the dataset's file {cache / name}" in one_error_line(capsys, "run")
    if dataset == "qm9":  # still the cache the load wrote
        assert len(qm9(source="canonical", download=False)) == 6
    else:
        assert not (cache / name).exists()


def test_sweep_output_linked_to_a_triples_file_is_refused(tmp_path, monkeypatch, capsys):
    _knowledge_graphs(tmp_path / "data", monkeypatch)
    train = tmp_path / "data" / "fb15k-237" / "train.txt"
    before = train.read_bytes()
    out = tmp_path / "sweep"
    out.mkdir()
    os.symlink(train, out / "summary.csv")
    argv = ["sweep", "--dataset", "fb15k-237", "--root", str(tmp_path / "data"), *QUICK]
    argv += ["--encoder", "compgcn", "--option", "top_types=3", "--lam", "0", "--distance", "tv"]
    assert main([*argv, "--out", str(out)]) == 2
    line = one_error_line(capsys, "sweep")
    assert f"--out {out / 'summary.csv'} is the same file as the dataset's file {train}" in line
    assert train.read_bytes() == before


def test_tsne_figure_hard_linked_to_a_ratings_file_is_refused(tmp_path, monkeypatch, capsys):
    pytest.importorskip("matplotlib")
    _movielens(tmp_path / "data", monkeypatch)
    users = tmp_path / "data" / "ml-1m" / "users.dat"
    before = users.read_bytes()
    os.link(users, tmp_path / "tsne.png")
    argv = ["tsne", "--dataset", "movielens-1m", "--root", str(tmp_path / "data")]
    argv += ["--epochs", "1", "--attacker-epochs", "1", "--quiet"]
    assert main([*argv, "--out", str(tmp_path / "tsne.png")]) == 2
    assert f"the dataset's file {users}" in one_error_line(capsys, "tsne")
    assert users.read_bytes() == before


@pytest.mark.parametrize("dataset", DATASET_NAMES)
def test_every_dataset_read_from_files_lists_them(tmp_path, monkeypatch, dataset):
    # A loader added without its list would leave its files open to being overwritten.
    monkeypatch.setenv("GALFAST_DATA", str(tmp_path))
    encoder = "compgcn" if dataset in KG_NAMES else "mpnn" if dataset == "qm9" else "gcn"
    files = dataset_files(ExperimentConfig(dataset=dataset, encoder=encoder))
    assert bool(files) == (not dataset.startswith("synthetic-"))
