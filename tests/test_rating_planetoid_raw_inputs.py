"""Damaged and malformed raw files of the Planetoid and MovieLens readers and of the download
cache: each gives a Python exception naming the file (and line) and the problem, never a crash,
a bare error from deep inside, or silently wrong data; on the command line, one line."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

import pytest
import scipy.sparse as sp
from test_datasets_movielens import write_ml1m, write_ml100k
from test_datasets_planetoid import NUM_ALL, _dump, _serve, write_planetoid

from galfast.cli import main
from galfast.datasets import ChecksumError, movielens, planetoid
from galfast.datasets.download import Resource, extract_zip, fetch
from galfast.datasets.planetoid_raw import load_pickle, read_planetoid_raw

pytest.importorskip("matplotlib")  # galfast.cli's run command


# ------------------------------------------------------------------ Planetoid pickles
def _garbled_codec(folder: Path) -> None:
    # Python 2 pickles store array bytes through _codecs.encode(..., "latin1"): one flipped
    # byte in the codec name made a bare LookupError.
    path = folder / "ind.citeseer.y"
    data = path.read_bytes()
    assert b"latin1" in data
    path.write_bytes(data.replace(b"latin1", b"lFtin1", 1))


def _length_past_memory(folder: Path) -> None:
    # A BINUNICODE8 string longer than any memory made a bare OverflowError.
    (folder / "ind.citeseer.y").write_bytes(b"\x80\x04\x8d" + (2**63 + 5).to_bytes(8, "little"))


@pytest.mark.parametrize("corrupt", [_garbled_codec, _length_past_memory])
def test_corrupt_pickle_bytes_are_named(tmp_path, corrupt):
    write_planetoid(tmp_path)
    corrupt(tmp_path)
    with pytest.raises(ValueError, match=r"ind\.citeseer\.y is not a valid Planetoid pickle"):
        read_planetoid_raw(tmp_path, "citeseer")


def _index_past_shape(matrix: sp.csr_matrix) -> None:
    matrix.indices = matrix.indices.copy()
    matrix.indices[0] = 10**6


def _decreasing_indptr(matrix: sp.csr_matrix) -> None:
    indptr = matrix.indptr.copy()
    indptr[3], indptr[4] = indptr[4] + 2, indptr[3]
    matrix.indptr = indptr


@pytest.mark.parametrize(
    "part, corrupt",
    [("allx", _index_past_shape), ("allx", _decreasing_indptr), ("tx", _index_past_shape)],
)
def test_sparse_matrix_with_broken_arrays_is_refused(tmp_path, part, corrupt):
    # These arrays went unchecked into scipy's C++ kernels: the features' toarray() wrote out
    # of bounds (a segfault), or tx failed with a message naming no file.
    write_planetoid(tmp_path)
    path = tmp_path / f"ind.citeseer.{part}"
    matrix = load_pickle(path)
    corrupt(matrix)
    _dump(path, matrix)
    with pytest.raises(ValueError, match=rf"ind\.citeseer\.{part} holds a corrupt sparse matrix"):
        read_planetoid_raw(tmp_path, "citeseer")


def test_ragged_label_rows_are_named(tmp_path):
    write_planetoid(tmp_path)
    _dump(tmp_path / "ind.citeseer.y", [[1, 0, 0], [0, 1]])
    with pytest.raises(ValueError, match=r"ind\.citeseer\.y must hold a 2-D one-hot label"):
        read_planetoid_raw(tmp_path, "citeseer")


def test_test_index_past_int64_is_named(tmp_path):
    write_planetoid(tmp_path)
    path = tmp_path / "ind.citeseer.test.index"
    path.write_text(path.read_text() + f"{10**30}\n")  # was a bare OverflowError
    with pytest.raises(ValueError, match=r"ind\.citeseer\.test\.index must hold one node id"):
        read_planetoid_raw(tmp_path, "citeseer")


def test_test_index_id_far_out_is_refused(tmp_path):
    # One mistyped id silently added 100,000 featureless, label-less nodes (a larger one
    # exhausted the memory).
    write_planetoid(tmp_path)
    path = tmp_path / "ind.citeseer.test.index"
    ids = path.read_text().split()
    ids[-1] = str(NUM_ALL + 100_000)
    path.write_text("\n".join(ids) + "\n")
    with pytest.raises(ValueError, match=rf"test\.index lists node {NUM_ALL + 100_000}"):
        read_planetoid_raw(tmp_path, "citeseer")


# ------------------------------------------------------------------ download cache
def _no_download(url, timeout):
    raise AssertionError("nothing may be downloaded")


@pytest.mark.parametrize("pin", [b"", b"\xff\xfe garbage\n"])
def test_broken_checksum_pin_is_named(tmp_path, pin):
    # A pin cut short (a crash while it was written) was a bare IndexError.
    (tmp_path / "file.bin.sha256").write_bytes(pin)
    with pytest.raises(ChecksumError, match=r"file\.bin\.sha256 holds no SHA-256"):
        fetch(Resource("https://example.org/file.bin", "file.bin"), tmp_path, opener=_no_download)


def test_a_wrong_pubmed_allx_download_is_refused_and_not_kept(tmp_path, monkeypatch):
    """ind.pubmed.allx had no known hash: the first download, garbage or not, was kept and
    pinned, and every later load failed on it, offline too."""
    cache = tmp_path / "planetoid"
    write_planetoid(cache, name="pubmed", parts={"y", "ty", "ally", "tx", "graph", "test.index"})
    monkeypatch.setenv("GALFAST_DATA", str(tmp_path))

    garbage = tmp_path / "served"
    garbage.mkdir()
    (garbage / "ind.pubmed.allx").write_bytes(b"not the real allx")
    with pytest.raises(ChecksumError, match=r"ind\.pubmed\.allx"):
        planetoid("pubmed", opener=_serve(garbage))
    assert not any(p.name.startswith("ind.pubmed.allx") for p in cache.iterdir())


def test_damaged_zip_is_named(tmp_path):
    archive = tmp_path / "ml-1m.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
        zipped.writestr("ml-1m/ratings.dat", "1::1::4::978300760\n" * 200)
    data = bytearray(archive.read_bytes())
    data[60] ^= 0xFF  # inside the compressed member: a bad deflate stream or CRC
    archive.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"ml-1m\.zip is damaged"):  # was zipfile/zlib errors
        extract_zip(archive, tmp_path, "ml-1m")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ml-1m.zip"]


# ------------------------------------------------------------------ MovieLens files
def _append(path: Path, text: str) -> None:
    path.write_bytes(path.read_bytes() + text.encode("latin-1"))


def test_ml1m_duplicate_rating_names_both_lines(tmp_path):
    write_ml1m(tmp_path / "ml-1m", ratings=[(1, 1, 4, 0), (2, 73, 5, 0), (1, 1, 2, 0)])
    with pytest.raises(
        ValueError,
        match=r"ratings\.dat line 3: user 1 rates movie 1 a second time \(first on "
        r"line 1\)",
    ):
        movielens("1m", root=tmp_path)


def test_ml100k_duplicate_rating_is_refused(tmp_path):
    ratings = write_ml100k(tmp_path / "ml-100k")
    user, movie = ratings[4][:2]
    _append(tmp_path / "ml-100k" / "u.data", f"{user}\t{movie}\t1\t0\n")
    with pytest.raises(ValueError, match=rf"u\.data line {len(ratings) + 1}: user {user} rates"):
        movielens("100k", root=tmp_path)


@pytest.mark.parametrize(
    "rating_lines, message",
    [
        # loadtxt counted rows from 0 and without empty lines: "row 1" was line 3 here.
        ("1::1::4::0\n\n1::73::x::0\n", r"ratings\.dat line 3: expected 4 whole numbers"),
        ("1::1::4::0\n99999999999999999999999::1::4::0\n", r"ratings\.dat line 2: expected 4"),
        ("1::1::4::0\n1::73::6::0\n", r"ratings\.dat line 2: rating 6 is outside 1\.\.5"),
        ("1::1::4::0\n77::73::4::0\n", r"ratings\.dat line 2: user id 77 is not in users\.dat"),
        ("1::1::4::0\n1::999::4::0\n", r"ratings\.dat line 2: movie id 999 is not in movies"),
    ],
)
def test_ml1m_bad_rating_names_its_line(tmp_path, rating_lines, message):
    write_ml1m(tmp_path / "ml-1m")
    (tmp_path / "ml-1m" / "ratings.dat").write_text(rating_lines)
    with pytest.raises(ValueError, match=message):
        movielens("1m", root=tmp_path)


@pytest.mark.parametrize(
    "file, line, message",
    [
        # latin-1's '²' passed isdigit() and int() failed with a message naming no file.
        ("users.dat", b"\xb2::F::1::1::0\n", r"users\.dat line \d+: UserID must be a whole number"),
        # Ids past int64 made an object array: a TypeError (a traceback on the CLI).
        ("users.dat", b"99999999999999999999999::F::1::1::0\n", r"users\.dat line \d+: UserID"),
        ("movies.dat", b"99999999999999999999999::T (1999)::Drama\n", r"movies\.dat line 6"),
    ],
)
def test_ml1m_ids_that_are_no_int64_are_named(tmp_path, file, line, message):
    write_ml1m(tmp_path / "ml-1m")
    path = tmp_path / "ml-1m" / file
    path.write_bytes(path.read_bytes() + line)
    with pytest.raises(ValueError, match=message):
        movielens("1m", root=tmp_path)


# ------------------------------------------------------------------ the command line
def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("galfast run: error: "), err
    return lines[0]


def _run(dataset: str, root: Path) -> int:
    argv = ["run", "--dataset", dataset, "--root", str(root), "--epochs", "1"]
    return main([*argv, "--attacker-epochs", "1", "--seeds", "1", "--quiet"])


def test_cli_names_a_corrupt_planetoid_pickle_in_one_line(tmp_path, capsys):
    write_planetoid(tmp_path, name="cora")
    path = tmp_path / "ind.cora.y"
    path.write_bytes(path.read_bytes().replace(b"latin1", b"lFtin1", 1))
    assert _run("cora", tmp_path) == 2
    assert "ind.cora.y is not a valid Planetoid pickle" in _one_error_line(capsys)


def test_cli_names_a_movielens_id_past_int64_in_one_line(tmp_path, capsys):
    write_ml1m(tmp_path / "ml-1m")
    _append(tmp_path / "ml-1m" / "users.dat", "99999999999999999999999::F::1::1::0\n")
    assert _run("movielens-1m", tmp_path) == 2
    assert re.search("users.dat line [0-9]+: UserID must be a whole", _one_error_line(capsys))


def test_ml1m_movies_saved_again_as_utf8_keep_their_titles(tmp_path):
    # Were decoded as latin-1: "MisÃ©rables, Les (1995)".
    write_ml1m(tmp_path / "ml-1m")
    path = tmp_path / "ml-1m" / "movies.dat"
    path.write_bytes(path.read_bytes().decode("latin-1").encode("utf-8"))
    assert "Misérables, Les (1995)" in movielens("1m", root=tmp_path).movie_titles


@pytest.mark.parametrize("age", ["0", "200"])
def test_ml100k_ages_that_are_no_ages_are_named(tmp_path, age):
    # Were bucketed unseen: 0 into "<18", 200 into "56+".
    write_ml100k(tmp_path / "ml-100k")
    path = tmp_path / "ml-100k" / "u.user"
    path.write_text(path.read_text().replace("1|24|", f"1|{age}|", 1))
    with pytest.raises(ValueError, match=f"u.user line 1: age {age} is not an age in years"):
        movielens("100k", root=tmp_path)
