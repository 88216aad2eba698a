"""MovieLens-1M and MovieLens-100K from the original GroupLens files.

The GroupLens licence forbids redistribution, so galfast ships no copy: :func:`movielens`
downloads the official archive (verified against a pinned SHA-256) or reads a local copy.
"""

from __future__ import annotations

import io
import itertools
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Union

import numpy as np

from galfast._args import check_choice, check_flag, check_fraction, check_int
from galfast.datasets._arrays import sorted_unique
from galfast.datasets.download import (
    DatasetNotFoundError,
    Resource,
    check_opener,
    check_root,
    data_dir,
    extract_zip,
    fetch,
    verify_file,
)
from galfast.datasets.rating_dataset import (
    NUM_RATING_LEVELS,
    RatingDataset,
    build_rating_dataset,
)

__all__ = [
    "AGE_GROUPS",
    "GENDERS",
    "OCCUPATIONS_100K",
    "OCCUPATIONS_1M",
    "age_group",
    "movielens",
    "movielens_files",
]

GENDERS = ("F", "M")

# ML-1M's age codes (README of ml-1m: 1 = "Under 18", 18 = "18-24", ..., 56 = "56+"), in order.
AGE_GROUPS = ("Under 18", "18-24", "25-34", "35-44", "45-49", "50-55", "56+")
_ML1M_AGE_CODES = (1, 18, 25, 35, 45, 50, 56)

OCCUPATIONS_1M = (
    "other or not specified", "academic/educator", "artist", "clerical/admin",
    "college/grad student", "customer service", "doctor/health care", "executive/managerial",
    "farmer", "homemaker", "K-12 student", "lawyer", "programmer", "retired", "sales/marketing",
    "scientist", "self-employed", "technician/engineer", "tradesman/craftsman", "unemployed",
    "writer",
)  # fmt: skip

# ML-100K's own list (its u.occupation file), in file order.
OCCUPATIONS_100K = (
    "administrator", "artist", "doctor", "educator", "engineer", "entertainment", "executive",
    "healthcare", "homemaker", "lawyer", "librarian", "marketing", "none", "other", "programmer",
    "retired", "salesman", "scientist", "student", "technician", "writer",
)  # fmt: skip

LICENSE = (
    "MovieLens data (c) GroupLens Research, University of Minnesota. Use is subject to the "
    "GroupLens licence in the archive's README: research use, no redistribution without "
    "permission, cite F. M. Harper and J. A. Konstan, 'The MovieLens Datasets: History and "
    "Context', ACM TiiS 5(4), 2015."
)


@dataclass(frozen=True)
class _Version:
    name: str
    folder: str
    files: tuple[str, ...]
    archive: Resource


# SHA-256 of the archives as registered by TensorFlow Datasets (url_checksums/movielens.txt:
# ml-1m.zip 5,917,549 bytes, ml-100k.zip 4,924,029 bytes); galfast's authors had no network to
# re-check them against a fresh download. GroupLens itself publishes only MD5s
# (ml-1m c4d9eecfca2ab87c1945afe126590906, ml-100k 0e33842e24a9c977be4e0107933c0723).
_VERSIONS = {
    "1m": _Version(
        "movielens-1m",
        "ml-1m",
        ("ratings.dat", "users.dat", "movies.dat"),
        Resource(
            "https://files.grouplens.org/datasets/movielens/ml-1m.zip",
            "ml-1m.zip",
            "a6898adb50b9ca05aa231689da44c217cb524e7ebd39d264c56e2832f2c54e20",
        ),
    ),
    "100k": _Version(
        "movielens-100k",
        "ml-100k",
        ("u.data", "u.user", "u.item"),
        Resource(
            "https://files.grouplens.org/datasets/movielens/ml-100k.zip",
            "ml-100k.zip",
            "50d2a982c66986937beb9ffb3aa76efe955bf3d5c6b761f4e3a7cd717c6a3229",
        ),
    ),
}


def age_group(age: np.ndarray) -> np.ndarray:
    """Years -> the 7 ML-1M age groups ``0..6``: <18, 18-24, 25-34, 35-44, 45-49, 50-55, 56+.

    ML-100K stores ages in years; bucketing them this way gives both versions the same
    7-class age attribute.
    """
    return np.searchsorted(np.array(_ML1M_AGE_CODES[1:]), np.asarray(age), side="right")


def _read_text(path: Path) -> str:
    """The GroupLens files are latin-1 (accented titles such as "Misérables"). A copy saved
    again as UTF-8 is read as UTF-8: as latin-1 its titles would read "MisÃ©rables", and
    latin-1 text beyond ASCII is almost never valid UTF-8."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def _int_table(text: str, separator: str, columns: int, source: str) -> np.ndarray:
    """The rows of `text` as int64; row ``r`` is the ``r``-th non-empty line (see _line_of)."""
    if not text.strip():
        raise ValueError(f"{source} holds no rows")
    try:
        # loadtxt takes one-character delimiters only; '#' starts no comment in these files.
        table = np.loadtxt(
            io.StringIO(text.replace(separator, "\t")),
            dtype=np.int64,
            delimiter="\t",
            ndmin=2,
            comments=None,
        )
    except ValueError as err:
        raise ValueError(_malformed(text, separator, columns, source, err)) from err
    if table.shape[1] != columns:
        raise ValueError(f"{source} must have {columns} columns per row, got {table.shape[1]}")
    return table


def _malformed(text: str, separator: str, columns: int, source: str, err: Exception) -> str:
    """Names the first line loadtxt could not read: its own message counts rows from 0,
    without the empty lines."""
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        fields = line.split(separator)
        if line and (len(fields) != columns or not all(map(_is_int64, fields))):
            return (
                f"{source} line {number}: expected {columns} whole numbers separated by "
                f"{separator!r}, got {line[:100]!r}"  # a file with '\r' line ends is one line
            )
    return f"{source} is malformed: {err}"


def _is_int64(field: str) -> bool:
    try:
        return -(2**63) <= int(field) < 2**63
    except ValueError:
        return False


def _line_of(text: str, row: int) -> int:
    """The line number of row `row` of the table _int_table read from `text`."""
    data_lines = (n for n, line in enumerate(text.split("\n"), 1) if line.removesuffix("\r"))
    return next(itertools.islice(data_lines, row, None))


def _fields(text: str, separator: str, count: int, source: str) -> list[tuple[str, list[str]]]:
    """Each non-blank line's fields, with where it is ("users.dat line 7") for the errors about
    its values."""
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split(separator)
        if len(parts) != count:
            raise ValueError(
                f"{source} line {number}: expected {count} {separator!r}-separated fields, "
                f"got {len(parts)}: {line!r}"
            )
        rows.append((f"{source} line {number}", parts))
    if not rows:
        raise ValueError(f"{source} holds no rows")
    return rows


def _code(value: str, classes: tuple[str, ...], what: str, source: str) -> int:
    if value not in classes:
        raise ValueError(f"{source}: unknown {what} {value!r} (expected one of {classes})")
    return classes.index(value)


def _whole(value: str, what: str, source: str) -> int:
    # isdecimal, not isdigit: int() rejects latin-1's '²'; an id past int64 fits no tensor.
    if not value.strip().isdecimal() or int(value) >= 2**63:
        raise ValueError(f"{source}: {what} must be a whole number below 2**63, got {value!r}")
    return int(value)


def _rating_line(parsed: dict, row: int) -> str:
    return f"{parsed['files'][0]} line {_line_of(parsed['rating_text'], row)}"


def _index_of(parsed: dict, column: int, known: np.ndarray, what: str) -> np.ndarray:
    """Maps the raw ids of a ratings column to their position in `known` (sorted), rejecting
    unknown ids."""
    raw = parsed["ratings"][:, column]
    position = np.searchsorted(known, raw)
    position = np.minimum(position, len(known) - 1)
    unknown = known[position] != raw
    if unknown.any():
        row = np.flatnonzero(unknown)[0]
        raise ValueError(
            f"{_rating_line(parsed, row)}: {what} id {raw[row]} is not in "
            f"{parsed['files'][column + 1]}"
        )
    return position


def _check_ratings(parsed: dict, user_index: np.ndarray, movie_index: np.ndarray) -> None:
    """Ratings lie in 1..5 and no user rates a movie twice: a second rating of the pair would
    be a parallel edge, and one copy could land in training, the other in test."""
    rating = parsed["ratings"][:, 2]
    bad = np.flatnonzero((rating < 1) | (rating > NUM_RATING_LEVELS))
    if bad.size:
        raise ValueError(
            f"{_rating_line(parsed, bad[0])}: rating {rating[bad[0]]} is outside "
            f"1..{NUM_RATING_LEVELS}"
        )
    pair = user_index * len(parsed["movie_ids"]) + movie_index
    if sorted_unique(pair).size != pair.size:
        order = np.argsort(pair, kind="stable")
        row = order[1:][pair[order][1:] == pair[order][:-1]].min()
        first = np.flatnonzero(pair == pair[row])[0]
        user, movie = parsed["ratings"][row, :2]
        raise ValueError(
            f"{_rating_line(parsed, row)}: user {user} rates movie {movie} a second time "
            f"(first on line {_line_of(parsed['rating_text'], first)})"
        )


def _age_years(value: str, where: str) -> int:
    age = _whole(value, "age", where)
    if not 1 <= age <= 120:  # a typo would land in the 56+ or the <18 group unseen
        raise ValueError(f"{where}: age {age} is not an age in years (1..120)")
    return age


def _age_code_1m(value: str, where: str) -> int:
    code = _whole(value, "age", where)
    if code not in _ML1M_AGE_CODES:
        raise ValueError(f"{where}: unknown age code {code} (expected one of {_ML1M_AGE_CODES})")
    return code


def _occupation_1m(value: str, where: str) -> int:
    code = _whole(value, "occupation", where)
    if code >= len(OCCUPATIONS_1M):
        raise ValueError(
            f"{where}: occupation codes lie in 0..{len(OCCUPATIONS_1M) - 1}, got {code}"
        )
    return code


def _parse_1m(folder: Path, files: tuple[str, ...]) -> dict:
    ratings_file, users_file, movies_file = files
    rating_text = _read_text(folder / ratings_file)
    ratings = _int_table(rating_text, "::", 4, ratings_file)
    users = _fields(_read_text(folder / users_file), "::", 5, users_file)
    movie_ids, titles = [], []
    for number, line in enumerate(_read_text(folder / movies_file).splitlines(), start=1):
        if not line.strip():
            continue
        # Titles may contain ':' (never '::'); the id leads and the genres trail.
        head, _, rest = line.partition("::")
        title, separator, _genres = rest.rpartition("::")
        if not separator:
            raise ValueError(f"{movies_file} line {number}: expected 'MovieID::Title::Genres'")
        movie_ids.append(_whole(head, "MovieID", f"{movies_file} line {number}"))
        titles.append(title)
    if not movie_ids:
        raise ValueError(f"{movies_file} holds no rows")
    age = [_ML1M_AGE_CODES.index(_age_code_1m(user[2], where)) for where, user in users]
    occupation = [_occupation_1m(user[3], where) for where, user in users]
    return dict(
        ratings=ratings[:, :3],
        rating_text=rating_text,
        user_ids=np.array([_whole(user[0], "UserID", where) for where, user in users]),
        gender=[_code(user[1], GENDERS, "gender", where) for where, user in users],
        age=age,
        occupation=occupation,
        movie_ids=np.array(movie_ids),
        titles=titles,
        occupations=OCCUPATIONS_1M,
        files=files,
    )


def _parse_100k(folder: Path, files: tuple[str, ...]) -> dict:
    ratings_file, users_file, items_file = files
    rating_text = _read_text(folder / ratings_file)
    ratings = _int_table(rating_text, "\t", 4, ratings_file)
    users = _fields(_read_text(folder / users_file), "|", 5, users_file)
    items = _fields(_read_text(folder / items_file), "|", 24, items_file)
    return dict(
        ratings=ratings[:, :3],
        rating_text=rating_text,
        user_ids=np.array([_whole(user[0], "user id", where) for where, user in users]),
        gender=[_code(user[2], GENDERS, "gender", where) for where, user in users],
        age=age_group(np.array([_age_years(user[1], where) for where, user in users])),
        occupation=[_code(user[3], OCCUPATIONS_100K, "occupation", where) for where, user in users],
        movie_ids=np.array([_whole(item[0], "movie id", where) for where, item in items]),
        titles=[item[1] for _, item in items],
        occupations=OCCUPATIONS_100K,
        files=files,
    )


def _root_folder(version: _Version, root: Path) -> Path:
    """The folder under a user's `root` holding the version's files: ``root/ml-1m`` or
    `root` itself."""
    for folder in (root / version.folder, root):
        if all((folder / name).is_file() for name in version.files):
            return folder
    raise DatasetNotFoundError(
        f"no {version.name} files under {root}: expected {root / version.folder}/ (or "
        f"{root}/ itself) to hold {', '.join(version.files)}. Unzip {version.archive.url} there."
    )


def _cache_paths(version: _Version) -> tuple[Path, Path]:
    """The cache's folder of the version's files and its archive, which unpacks there."""
    cache = data_dir()
    return cache / version.folder, cache / version.archive.filename


def _locate(
    version: _Version,
    root: Optional[Path],
    download: bool,
    opener: Callable[..., object],
) -> Path:
    """The folder holding the version's files: under `root` if given, else in the cache
    (downloading and extracting the archive when needed)."""
    if root is not None:
        return _root_folder(version, root)
    folder, archive = _cache_paths(version)
    if all((folder / name).is_file() for name in version.files):
        return folder
    cache = archive.parent
    if archive.is_file():
        verify_file(archive, version.archive)  # it may have been put there by hand
    elif not download:
        raise DatasetNotFoundError(_offline_message(version, cache, "download=False"))
    else:
        try:
            archive = fetch(version.archive, cache, opener=opener)
        except OSError as err:
            raise DatasetNotFoundError(_offline_message(version, cache, str(err))) from err
    return extract_zip(archive, cache, version.folder)


def _checked_version(version: object) -> _Version:
    if not (isinstance(version, str) and version in _VERSIONS):  # a list was unhashable
        raise ValueError(
            f"version must be one of {sorted(_VERSIONS)}: unknown MovieLens version {version!r}"
        )
    return _VERSIONS[version]


def movielens_files(
    version: str = "1m", root: Optional[Union[str, Path]] = None
) -> tuple[Path, ...]:
    """The files ``movielens(version, root)`` reads: the users, movies and ratings files in
    the folder it reads them from, and in the cache also the archive it downloads there (and
    unpacks next to it). What a command writes must be none of these. Raises as
    :func:`movielens` does for an unknown ``version`` or a ``root`` without the files."""
    spec = _checked_version(version)
    root = check_root(root)
    if root is not None:
        return tuple(_root_folder(spec, root) / name for name in spec.files)
    folder, archive = _cache_paths(spec)
    return (*(folder / name for name in spec.files), archive)


def _offline_message(version: _Version, cache: Path, reason: str) -> str:
    return (
        f"{version.name} is not on this machine and was not downloaded ({reason}). Download "
        f"{version.archive.url} elsewhere and either put the zip in {cache}/ or unzip it so "
        f"that {cache / version.folder}/ holds {', '.join(version.files)}; or set GALFAST_DATA "
        "to a folder laid out that way."
    )


def movielens(
    version: str = "1m",
    root: Optional[Union[str, Path]] = None,
    seed: int = 0,
    *,
    test_fraction: float = 0.1,
    unrated_movies: str = "keep",
    download: bool = True,
    opener: Callable[..., object] = urllib.request.urlopen,
) -> RatingDataset:
    """MovieLens-1M or -100K as a user-movie rating graph with user attributes.

    Users become nodes ``0..U-1`` in the order of the users file, movies nodes ``U..U+M-1`` in
    the order of the movies file. By default every movie listed there is a node, rated or not
    (ML-1M lists 3,883 movies of which 3,706 have ratings, so 177 nodes are isolated);
    ``unrated_movies="drop"`` keeps only the rated ones, as the GAL paper counts them (6,040 +
    3,706 nodes). Ratings are split at random, ``test_fraction`` held out, seeded.

    User attributes (``ds.attributes``):

    * ``gender``: 2 classes ``F, M``.
    * ``age``: 7 groups ``Under 18, 18-24, 25-34, 35-44, 45-49, 50-55, 56+`` (ML-1M's codes
      1, 18, 25, 35, 45, 50, 56 map to 0..6; ML-100K's ages in years are bucketed into the
      same groups with :func:`age_group`).
    * ``occupation``: 21 classes (ML-1M's codes 0..20, see ``OCCUPATIONS_1M``; ML-100K has its
      own 21 names, ``OCCUPATIONS_100K``).

    Args:
        version: ``"1m"`` or ``"100k"``.
        root: a folder holding the extracted files (``ml-1m/`` or the files themselves);
            ``None`` uses the cache (``$GALFAST_DATA`` or ``~/.cache/galfast``), downloading
            the official archive there when missing.
        seed: seeds the rating split.
        test_fraction: share of ratings held out.
        unrated_movies: ``"keep"`` (isolated movie nodes) or ``"drop"`` (the paper's count).
        download: allow the download (otherwise a missing copy raises).
        opener: the URL opener (``urllib.request.urlopen``; replaceable for mirrors and tests).

    Raises:
        DatasetNotFoundError: no local copy and no download possible; says where to put it.
        ValueError: a file is malformed (the message names the file and line).

    Example:
        >>> ds = movielens("1m", root="/data")
        >>> ds.num_users, ds.num_movies, ds.num_ratings
        (6040, 3883, 1000209)
    """
    spec = _checked_version(version)
    check_choice("unrated_movies", unrated_movies, ("keep", "drop"))
    download = check_flag("download", download)  # download="no" is truthy: it downloaded
    # Before the files are parsed (seconds for ML-1M): the split is drawn last.
    seed, root, opener = check_int("seed", seed, 0), check_root(root), check_opener(opener)
    test_fraction = check_fraction("test_fraction", test_fraction)
    folder = _locate(spec, root, download, opener)
    parsed = (_parse_1m if version == "1m" else _parse_100k)(folder, spec.files)
    order_users, order_movies = np.argsort(parsed["user_ids"]), np.argsort(parsed["movie_ids"])
    for what, ids, order in (
        ("user", parsed["user_ids"], order_users),
        ("movie", parsed["movie_ids"], order_movies),
    ):
        if np.any(np.diff(ids[order]) == 0):
            raise ValueError(f"{spec.name}: a {what} id is listed twice in the {what} file")
    movie_file = parsed["files"][2]
    user_index = order_users[_index_of(parsed, 0, parsed["user_ids"][order_users], "user")]
    movie_index = order_movies[_index_of(parsed, 1, parsed["movie_ids"][order_movies], "movie")]
    _check_ratings(parsed, user_index, movie_index)
    rated = np.zeros(len(parsed["movie_ids"]), dtype=bool)
    rated[movie_index] = True
    movie_ids, titles = parsed["movie_ids"], tuple(parsed["titles"])
    notes = ()
    if not rated.all():
        unrated = f"{int((~rated).sum())} of {rated.size} movies in {movie_file} have no rating"
        if unrated_movies == "keep":
            notes = (f"{unrated}; they are kept as isolated movie nodes.",)
        else:
            notes = (f"{unrated}; they were dropped (unrated_movies='drop').",)
            movie_index = (np.cumsum(rated) - 1)[movie_index]
            movie_ids = movie_ids[rated]
            titles = tuple(t for t, keep in zip(titles, rated) if keep)
    return build_rating_dataset(
        name=spec.name,
        user_index=user_index,
        movie_index=movie_index,
        rating=parsed["ratings"][:, 2],
        num_users=len(parsed["user_ids"]),
        num_movies=len(movie_ids),
        attributes=dict(
            gender=parsed["gender"], age=parsed["age"], occupation=parsed["occupation"]
        ),
        attribute_classes=dict(gender=GENDERS, age=AGE_GROUPS, occupation=parsed["occupations"]),
        raw_user_ids=parsed["user_ids"],
        raw_movie_ids=movie_ids,
        movie_titles=titles,
        license=LICENSE,
        notes=notes,
        seed=seed,
        test_fraction=test_fraction,
    )
