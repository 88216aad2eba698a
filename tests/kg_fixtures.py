"""Small FB15k-237 / WN18RR folders in exactly the real files' formats, and helpers to pin
their hashes in the loader's checksum table."""

from __future__ import annotations

import hashlib
import io
import urllib.error
import zipfile
from pathlib import Path

from galfast.datasets import knowledge_graph

# WN18RR: 8-digit synset offsets, relation names with a leading underscore.
WN_TRIPLES = {
    "train": [
        ("00001740", "_hypernym", "00001930"),
        ("00002137", "_derivationally_related_form", "00001740"),
        ("00001930", "_hypernym", "00002452"),
        ("00002452", "_also_see", "00002137"),
    ],
    "valid": [("00002684", "_hypernym", "00001930")],
    "test": [("00001740", "_also_see", "00002684"), ("00003553", "_hypernym", "00002452")],
}
WN_ENTITIES = ("00001740", "00001930", "00002137", "00002452", "00002684", "00003553")
WN_RELATIONS = ("_also_see", "_derivationally_related_form", "_hypernym")
# id, name, tag, sense; 00003553 has no row, 09999999 is not an entity of the graph.
WN_POS_SENSE = [
    ("00001740", "__take_a_breath_VB_1", "VB", 1),
    ("00001930", "__physical_entity_NN_1", "NN", 19),
    ("00002137", "__abstraction_NN_6", "NN", 20),
    ("00002452", "__thing_NN_12", "NN", 33),
    ("00002684", "__able_JJ_1", "JJ", 2),
    ("09999999", "__fast_RB_1", "RB", 1),
]

# FB15k-237: Freebase mids, relation paths; the type file lists one (mid, type) pair per line.
FB_TRIPLES = {
    "train": [
        ("/m/027rn", "/location/country/form_of_government", "/m/06cx9"),
        ("/m/017dcd", "/tv/tv_program/regular_cast./tv/regular_tv_appearance/actor", "/m/06v8s0"),
        ("/m/07s9rl0", "/media_common/netflix_genre/titles", "/m/0170z3"),
        ("/m/06v8s0", "/people/person/nationality", "/m/027rn"),
    ],
    "valid": [("/m/07pd_j", "/film/film/genre", "/m/07s9rl0")],
    "test": [("/m/0170z3", "/film/film/genre", "/m/07s9rl0")],
}
FB_TYPES = [
    ("/m/027rn", "/location/country"),
    ("/m/027rn", "/location/location"),
    ("/m/06cx9", "/government/form_of_government"),
    ("/m/06v8s0", "/people/person"),
    ("/m/06v8s0", "/tv/tv_actor"),
    ("/m/017dcd", "/tv/tv_program"),
    ("/m/0170z3", "/film/film"),
    ("/m/07pd_j", "/film/film"),
    ("/m/0zzzz9", "/people/person"),  # not an entity of FB15k-237
    ("/m/0zzzz8", "/people/person"),
    ("/m/0zzzz7", "/location/location"),
    ("/m/0zzzz7", "/location/location"),  # the same pair twice counts once
]
FB_ENTITIES = tuple(sorted({e for rows in FB_TRIPLES.values() for h, _, t in rows for e in (h, t)}))


# A CompGCN-ConvE model small enough for the 6-entity graphs (ConvE: 4 x 8 images).
SMALL_MODEL = (
    ("dim", 32),
    ("init_dim", 8),
    ("k_w", 4),
    ("k_h", 8),
    ("kernel_size", 3),
    ("num_filters", 4),
)


def _write_triples(folder: Path, triples: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for split, rows in triples.items():
        (folder / f"{split}.txt").write_text("".join("\t".join(row) + "\n" for row in rows))


def write_wn18rr(folder: Path, attributes: bool = True) -> Path:
    _write_triples(folder, WN_TRIPLES)
    if attributes:
        lines = ["id\tname\tPOS_tag\tsense"] + ["\t".join(map(str, row)) for row in WN_POS_SENSE]
        (folder / "entity_pos_sense.tsv").write_text("\n".join(lines) + "\n")
    return folder


def write_fb15k_237(folder: Path, attributes: bool = True) -> Path:
    _write_triples(folder, FB_TRIPLES)
    if attributes:
        (folder / "entity_types").mkdir(exist_ok=True)
        text = "".join(f"{mid}\t{kind}\n" for mid, kind in FB_TYPES)
        (folder / "entity_types" / "Entity_Type_train.txt").write_text(text)
    return folder


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def pin_hashes(monkeypatch, name: str, files: dict) -> None:
    """Replaces the loader's pinned SHA-256 of `name`'s files by those of `files`
    (``key -> path``)."""
    table = dict(knowledge_graph._SHA256)
    table.update({(name, key): sha256(path) for key, path in files.items()})
    monkeypatch.setattr(knowledge_graph, "_SHA256", table)


def pin_folder(monkeypatch, name: str, folder: Path) -> None:
    """Pins every split and attribute file present in `folder`."""
    keys = ["train.txt", "valid.txt", "test.txt", knowledge_graph._ATTRIBUTE_FILE[name][0]]
    pin_hashes(monkeypatch, name, {k: folder / k for k in keys if (folder / k).is_file()})


def zip_like_compgcn(folder: Path, top: str, target: Path) -> Path:
    """A zip with the archive's layout: ``<top>/`` then ``<top>/{test,train,valid}.txt``."""
    with zipfile.ZipFile(target, "w") as zipped:
        zipped.writestr(f"{top}/", b"")
        for split in ("test", "train", "valid"):
            zipped.write(folder / f"{split}.txt", f"{top}/{split}.txt")
    return target


def serve(files: dict):
    """An opener serving ``files`` (URL file name -> path)."""

    def opener(url, timeout):
        path = files.get(url.rsplit("/", 1)[1])
        if path is None:
            raise urllib.error.URLError(f"404 {url}")
        response = io.BytesIO(path.read_bytes())
        response.headers = {"Content-Length": str(path.stat().st_size)}
        return response

    return opener


def offline(url, timeout):
    raise urllib.error.URLError("no network")


def wn18rr_download(tmp_path: Path, monkeypatch):
    """An upstream WN18RR (no attribute file) served as CompGCN's pinned zip, with the cache
    folder set to ``tmp_path / "cache"``; returns the cache folder and the opener."""
    upstream = write_wn18rr(tmp_path / "upstream", attributes=False)
    archive = zip_like_compgcn(upstream, "WN18RR", tmp_path / "WN18RR.zip")
    pin_folder(monkeypatch, "wn18rr", upstream)
    pin_hashes(monkeypatch, "wn18rr", {"WN18RR.zip": archive})
    cache = tmp_path / "cache"
    monkeypatch.setenv("GALFAST_DATA", str(cache))
    return cache, serve({"WN18RR.zip": archive})
