"""FB15k-237 and WN18RR: the loaders on generated fixtures in the real formats (root, cache,
download, checksums, attributes), the registry, the SensitiveAttribute conversion, and the real
copies' counts when ../shared/data is present."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from kg_fixtures import (
    FB_ENTITIES,
    WN_ENTITIES,
    WN_RELATIONS,
    WN_TRIPLES,
    offline,
    pin_folder,
    serve,
    sha256,
    wn18rr_download,
    write_fb15k_237,
    write_wn18rr,
    zip_like_compgcn,
)

from galfast.datasets import (
    ChecksumError,
    DatasetNotFoundError,
    KnowledgeGraphDataset,
    fb15k_237,
    load,
    wn18rr,
)
from galfast.datasets.registry import loader_options
from galfast.experiments.kg_sensitive import kg_sensitive_attribute


def _shared_data():
    repo = Path(__file__).resolve().parents[1]
    candidates = [repo.parent / "shared" / "data", Path("/work/shared/data")]
    return next((p for p in candidates if (p / "wn18rr").is_dir()), None)


SHARED = _shared_data()
needs_shared = pytest.mark.skipif(SHARED is None, reason="no shared FB15k-237 / WN18RR copy here")


def _ids(names, vocabulary):
    return [vocabulary.index(n) for n in names]


def test_wn18rr_triples_and_vocabularies(wn_folder):
    ds = wn18rr(root=wn_folder)
    assert isinstance(ds, KnowledgeGraphDataset)
    assert ds.entities == WN_ENTITIES and ds.relations == WN_RELATIONS
    for split in ("train", "valid", "test"):
        expected = [
            [WN_ENTITIES.index(h), WN_RELATIONS.index(r), WN_ENTITIES.index(t)]
            for h, r, t in WN_TRIPLES[split]
        ]
        assert getattr(ds, split).tolist() == expected
        assert getattr(ds, split).dtype == torch.int64
    assert ds.all_triples.size(0) == 7
    assert (ds.num_entities, ds.num_relations) == (6, 3)


@pytest.mark.parametrize("name", ["wn18rr", "fb15k-237"])
def test_the_attribute_file_beside_triples_in_the_archive_subfolder_is_found(
    name, tmp_path, monkeypatch
):
    """root/WN18RR/ (or root/FB15k-237/) holding the triples and the attribute file, as the
    docstrings allow: the attribute file was looked for in root alone (DatasetNotFoundError)."""
    sub = {"wn18rr": "WN18RR", "fb15k-237": "FB15k-237"}[name]
    write = write_wn18rr if name == "wn18rr" else write_fb15k_237
    folder = write(tmp_path / sub)
    pin_folder(monkeypatch, name, folder)
    ds = wn18rr(root=tmp_path) if name == "wn18rr" else fb15k_237(root=tmp_path, top_types=3)
    assert set(ds.attributes) == ({"pos", "sense"} if name == "wn18rr" else {"types"})


def test_graph_holds_training_triples_both_ways_with_inverse_types(wn_folder):
    ds = wn18rr(root=wn_folder)
    src, dst = ds.graph.edge_index()
    edges = set(zip(src.tolist(), dst.tolist(), ds.graph.edge_type.tolist()))
    expected = set()
    for h, r, t in ds.train.tolist():
        expected |= {(h, t, r), (t, h, r + ds.num_relations)}
    assert edges == expected and ds.graph.num_edges == 2 * ds.train.size(0)


def test_wn18rr_pos_and_merged_senses(wn_folder):
    ds = wn18rr(root=wn_folder)
    assert ds.attribute_kinds == {"pos": "categorical", "sense": "categorical"}
    assert ds.attribute_classes["pos"] == ("JJ", "NN", "RB", "VB")
    senses = ds.attribute_classes["sense"]
    assert len(senses) == 20 and senses[0] == "sense 1" and senses[-1] == "sense >= 20"
    # 00003553 has no row and 09999999 is not an entity: known on the other five, sorted.
    assert ds.attribute_nodes["pos"].tolist() == [0, 1, 2, 3, 4]
    assert ds.attributes["pos"].tolist() == [3, 1, 1, 1, 0]
    # senses 1, 19, 20, 33, 2 -> classes 0, 18, 19 (merged), 19 (merged), 1
    assert ds.attributes["sense"].tolist() == [0, 18, 19, 19, 1]
    assert ds.notes == ("1 entities have no part-of-speech / sense row: not in the attribute.",)


def test_sense_cap_sets_the_number_of_sense_classes(wn_folder):
    ds = wn18rr(root=wn_folder, sense_cap=3)
    assert ds.attributes["sense"].tolist() == [0, 2, 2, 2, 1]
    assert ds.attribute_classes["sense"] == ("sense 1", "sense 2", "sense >= 3")
    with pytest.raises(ValueError, match="sense_cap"):
        wn18rr(root=wn_folder, sense_cap=1)
    for bad in (2.5, True, "3"):
        with pytest.raises(ValueError, match="^sense_cap must be an int, got"):
            wn18rr(root=wn_folder, sense_cap=bad)


def test_numpy_integer_counts_are_taken_as_ints(wn_folder, fb_folder):
    # e.g. a count computed with NumPy; refused as "not an int" before
    wn = wn18rr(root=wn_folder, sense_cap=np.int64(3))
    assert wn.attribute_classes["sense"] == ("sense 1", "sense 2", "sense >= 3")
    fb = fb15k_237(root=fb_folder, top_types=np.int32(3))
    assert (
        fb.attribute_classes["types"]
        == fb15k_237(root=fb_folder, top_types=3).attribute_classes["types"]
    )


def test_fb15k_237_top_types_multilabel(fb_folder):
    ds = fb15k_237(root=fb_folder, top_types=3)
    # Pair counts: /people/person 3, /location/location 2, /film/film 2, the rest 1;
    # ties by name: /film/film before /location/location.
    assert ds.attribute_classes["types"] == (
        "/people/person",
        "/film/film",
        "/location/location",
    )
    assert ds.attribute_kinds["types"] == "multilabel"
    known = [FB_ENTITIES[i] for i in ds.attribute_nodes["types"].tolist()]
    assert known == sorted(["/m/027rn", "/m/06v8s0", "/m/0170z3", "/m/07pd_j"])
    rows = dict(zip(known, ds.attributes["types"].tolist()))
    assert rows["/m/027rn"] == [0, 0, 1]
    assert rows["/m/06v8s0"] == [1, 0, 0]
    assert rows["/m/0170z3"] == [0, 1, 0]
    assert ds.attributes["types"].dtype == torch.int64


@pytest.mark.parametrize(
    ("known", "entities"),
    [
        ("top", ["/m/027rn", "/m/06v8s0", "/m/0170z3", "/m/07pd_j"]),
        ("typed", ["/m/027rn", "/m/06v8s0", "/m/0170z3", "/m/07pd_j", "/m/06cx9", "/m/017dcd"]),
        ("all", list(FB_ENTITIES)),
    ],
)
def test_types_known_chooses_the_known_entities(fb_folder, known, entities):
    ds = fb15k_237(root=fb_folder, top_types=3, types_known=known)
    assert ds.attribute_nodes["types"].tolist() == sorted(_ids(entities, FB_ENTITIES))
    unlabelled = ds.attributes["types"].sum(1) == 0
    assert int(unlabelled.sum()) == len(entities) - 4


def test_bad_type_options(fb_folder):
    with pytest.raises(ValueError, match="types_known must be one of"):
        fb15k_237(root=fb_folder, types_known="some")
    with pytest.raises(ValueError, match="fewer than top_types=50"):
        fb15k_237(root=fb_folder)
    with pytest.raises(ValueError, match="^top_types must be >= 1, got 0"):
        fb15k_237(root=fb_folder, top_types=0)
    for bad in (2.5, True, None):
        with pytest.raises(ValueError, match="^top_types must be an int, got"):
            fb15k_237(root=fb_folder, top_types=bad)


def test_root_may_be_the_parent_folder(wn_folder):
    assert wn18rr(root=wn_folder.parent).num_entities == len(WN_ENTITIES)


def test_checksum_mismatch_names_the_file(tmp_path):
    folder = write_wn18rr(tmp_path / "wn18rr")  # the real hashes stay pinned: no match
    with pytest.raises(ChecksumError, match=r"SHA-256 mismatch for .*train.txt"):
        wn18rr(root=folder)


def test_tampered_attribute_file_is_refused(wn_folder):
    path = wn_folder / "entity_pos_sense.tsv"
    path.write_text(path.read_text().replace("\tVB\t", "\tNN\t"))
    with pytest.raises(ChecksumError, match="entity_pos_sense.tsv"):
        wn18rr(root=wn_folder)


def test_missing_attribute_file_says_where_and_how_to_skip(tmp_path, monkeypatch):
    folder = write_fb15k_237(tmp_path / "fb15k-237", attributes=False)
    pin_folder(monkeypatch, "fb15k-237", folder)
    with pytest.raises(DatasetNotFoundError) as info:
        fb15k_237(root=folder)
    message = str(info.value)
    assert str(folder / "entity_types" / "Entity_Type_train.txt") in message
    assert "attributes=False" in message
    ds = fb15k_237(root=folder, attributes=False)
    assert ds.attributes == {} and ds.train.size(0) == 4


def test_missing_triples_under_root(tmp_path):
    with pytest.raises(DatasetNotFoundError, match="no wn18rr triples under"):
        wn18rr(root=tmp_path)


@pytest.mark.parametrize(
    ("line", "message"),
    [("a\tb\n", "line 2: expected 'head<TAB>relation<TAB>tail'"), ("a\t\tc\n", "line 2")],
)
def test_malformed_triple_line(wn_folder, monkeypatch, line, message):
    path = wn_folder / "valid.txt"
    path.write_text(path.read_text() + line)
    pin_folder(monkeypatch, "wn18rr", wn_folder)
    with pytest.raises(ValueError, match=message):
        wn18rr(root=wn_folder)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("00001740\tx\tXX\t1", "malformed row"),
        ("00001740\tx\tNN\tone", "malformed row"),
        ("00001740\tx\tNN\t0", "sense numbers start at 1"),
        ("00001740\tx\tNN\t3", "lists entity '00001740' twice"),
    ],
)
def test_malformed_pos_sense_rows(wn_folder, monkeypatch, row, message):
    path = wn_folder / "entity_pos_sense.tsv"
    path.write_text(path.read_text() + row + "\n")
    pin_folder(monkeypatch, "wn18rr", wn_folder)
    with pytest.raises(ValueError, match=message):
        wn18rr(root=wn_folder)


def test_download_unpacks_into_the_cache_then_works_offline(tmp_path, monkeypatch):
    cache, opener = wn18rr_download(tmp_path, monkeypatch)
    ds = wn18rr(attributes=False, opener=opener)
    assert sorted(p.name for p in (cache / "wn18rr").iterdir()) == ["WN18RR", "WN18RR.zip"]
    assert ds.entities == WN_ENTITIES
    # The attribute file goes beside the archive; then everything loads offline.
    write_wn18rr(tmp_path / "attrs")
    (tmp_path / "attrs" / "entity_pos_sense.tsv").rename(cache / "wn18rr" / "entity_pos_sense.tsv")
    pin_folder(monkeypatch, "wn18rr", cache / "wn18rr")
    again = wn18rr(opener=offline)
    assert torch.equal(again.train, ds.train) and again.attributes["pos"].numel() == 5


def test_tampered_download_is_refused_and_nothing_is_kept(tmp_path, monkeypatch):
    upstream = write_fb15k_237(tmp_path / "upstream", attributes=False)
    archive = zip_like_compgcn(upstream, "FB15k-237", tmp_path / "FB15k-237.zip")
    monkeypatch.setenv("GALFAST_DATA", str(tmp_path / "cache"))
    with pytest.raises(ChecksumError, match="SHA-256 mismatch for FB15k-237.zip"):
        fb15k_237(opener=serve({"FB15k-237.zip": archive}))
    assert list((tmp_path / "cache" / "fb15k-237").iterdir()) == []


def test_offline_without_copy_names_the_archive_url(tmp_path, monkeypatch):
    monkeypatch.setenv("GALFAST_DATA", str(tmp_path))
    with pytest.raises(DatasetNotFoundError) as info:
        fb15k_237(opener=offline)
    message = str(info.value)
    assert "malllabiisc/CompGCN/raw/" in message and "FB15k-237.zip" in message
    assert "no network" in message and str(tmp_path / "fb15k-237") in message
    with pytest.raises(DatasetNotFoundError, match="download=False"):
        wn18rr(download=False)


def test_registry_loads_by_name_with_the_loader_options(wn_folder, fb_folder):
    assert loader_options("wn18rr") == ("attributes", "download", "opener", "sense_cap")
    assert loader_options("fb15k-237") == (
        "attributes",
        "download",
        "opener",
        "top_types",
        "types_known",
    )
    assert load("wn18rr", root=wn_folder, sense_cap=4).attribute_classes["sense"][-1] == (
        "sense >= 4"
    )
    assert load("fb15k-237", root=fb_folder, top_types=2).attributes["types"].size(1) == 2
    with pytest.raises(ValueError, match="wn18rr takes no option 'top_types'"):
        load("wn18rr", root=wn_folder, top_types=2)


def test_dataset_checks_its_fields(wn_folder):
    ds = wn18rr(root=wn_folder)
    fields = {f: getattr(ds, f) for f in ds.__dataclass_fields__}
    with pytest.raises(ValueError, match="holds an entity id outside"):
        KnowledgeGraphDataset(**{**fields, "test": torch.tensor([[0, 0, 6]])})
    with pytest.raises(ValueError, match="holds a relation id outside"):
        KnowledgeGraphDataset(**{**fields, "test": torch.tensor([[0, 3, 1]])})
    with pytest.raises(ValueError, match=r"must be an int64 \[T, 3\]"):
        KnowledgeGraphDataset(**{**fields, "test": torch.zeros(2, 2, dtype=torch.int64)})
    bad = dict(ds.attributes, pos=torch.tensor([0, 1, 4, 1, 0]))
    with pytest.raises(ValueError, match="holds values outside"):
        KnowledgeGraphDataset(**{**fields, "attributes": bad})
    unsorted = dict(ds.attribute_nodes, pos=torch.tensor([1, 0, 2, 3, 4]))
    with pytest.raises(ValueError, match="sorted without repeats"):
        KnowledgeGraphDataset(**{**fields, "attribute_nodes": unsorted})
    with pytest.raises(ValueError, match="must name the same attributes"):
        KnowledgeGraphDataset(**{**fields, "attribute_kinds": {"pos": "categorical"}})


def test_to_device_and_repr(wn_folder):
    ds = wn18rr(root=wn_folder).to("cpu")
    assert ds.attribute_nodes["sense"].device.type == "cpu"
    assert "wn18rr: 6 entities, 3 relations, 4 / 1 / 2" in repr(ds)
    assert "pos (4), sense (20)" in repr(ds)


def test_sensitive_attributes_for_gal(wn_folder, fb_folder):
    pos = kg_sensitive_attribute(wn18rr(root=wn_folder), "pos")
    assert (pos.kind, pos.num_classes, pos.num_outputs) == ("categorical", 4, 4)
    types = kg_sensitive_attribute(fb15k_237(root=fb_folder, top_types=3), "types")
    assert (types.kind, types.num_outputs) == ("multilabel", 3)
    known = types.known(num_nodes=len(FB_ENTITIES))
    assert known.nodes.tolist() == sorted(
        _ids(["/m/027rn", "/m/06v8s0", "/m/0170z3", "/m/07pd_j"], FB_ENTITIES)
    )
    assert known.targets.dtype == torch.get_default_dtype() and known.targets.shape == (4, 3)
    with pytest.raises(ValueError, match="has no attribute 'gender'"):
        kg_sensitive_attribute(wn18rr(root=wn_folder), "gender")


@needs_shared
def test_real_wn18rr_counts():
    ds = wn18rr(root=SHARED)
    assert (ds.num_entities, ds.num_relations) == (40943, 11)
    assert [t.size(0) for t in (ds.train, ds.valid, ds.test)] == [86835, 3034, 3134]
    counts = torch.bincount(ds.attributes["pos"], minlength=4).tolist()
    assert dict(zip(ds.attribute_classes["pos"], counts)) == {
        "NN": 32093,
        "VB": 7714,
        "JJ": 1105,
        "RB": 31,
    }
    assert ds.attribute_nodes["sense"].numel() == 40943 and ds.notes == ()
    sense = torch.bincount(ds.attributes["sense"], minlength=20)
    assert sense.numel() == 20 and int(sense[0]) > int(sense[1]) > 0


@needs_shared
def test_real_fb15k_237_counts():
    ds = fb15k_237(root=SHARED)
    assert (ds.num_entities, ds.num_relations) == (14541, 237)
    assert [t.size(0) for t in (ds.train, ds.valid, ds.test)] == [272115, 17535, 20466]
    assert ds.attributes["types"].shape == (13060, 50)
    assert fb15k_237(root=SHARED, types_known="typed").attribute_nodes["types"].numel() == 14408
    # The 50 labels are the shared list of the most frequent train types.
    listed = (SHARED / "fb15k-237" / "entity_types" / "top50_types_from_train.tsv").read_text()
    top50 = {line.split("\t")[1] for line in listed.splitlines()[1:]}
    assert set(ds.attribute_classes["types"]) == top50
    assert ds.attribute_classes["types"][0] == "/people/person"


@needs_shared
def test_real_files_match_the_pinned_hashes():
    from galfast.datasets.knowledge_graph import _SHA256

    for (name, key), digest in _SHA256.items():
        if not key.endswith(".zip"):
            assert sha256(SHARED / name / key) == digest, key


@needs_shared
def test_real_wn18rr_queries_and_filtered_oracle_ranks_first():
    from galfast.models import evaluate_link_prediction, kg_queries

    ds = wn18rr(root=SHARED, attributes=False)
    train = kg_queries(ds.train, ds.num_entities, ds.num_relations)
    assert train.answers.numel() == 2 * 86835  # every training triple, both directions
    known = kg_queries(ds.all_triples, ds.num_entities, ds.num_relations)

    def oracle(entity, relation):  # 1 for every true answer of the query, 0 elsewhere
        return known.targets(known.find(entity, relation))

    result = evaluate_link_prediction(oracle, ds.test, known, batch_size=512)
    # Filtering removes the other true answers, so the answer ranks first; unfiltered it
    # would tie with them.
    assert result.both.mrr == 1.0 and result.both.count == 2 * 3134
