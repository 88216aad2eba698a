"""Knowledge-graph inputs a user may legally pass that were read wrongly or failed with a
traceback: integer ids of a dtype other than int64, a dataset loaded without its attributes,
a ConvE kernel larger than its image, seeded batches on a resumed run, a bias given as text."""

from __future__ import annotations

import pytest
import torch
from kg_fixtures import pin_folder, write_wn18rr

from galfast.cli import main
from galfast.datasets import LinkSplit
from galfast.graph import Graph
from galfast.models import CompGCNEncoder, DistMultDecoder, KGLinkPredictor, kg_queries
from galfast.models.link_ranking import filtered_ranks
from galfast.train import GALTrainer, OneToNBatches, OneToNHead, OneToNLoss

NARROW = (torch.int32, torch.int16, torch.uint8)


def test_queries_find_and_contain_ids_of_any_integer_dtype():
    # Keys entity * 2R * N + answer overflow int32 on a graph of this size: a true triple
    # was reported unknown (and the filter lost its answers).
    triples = torch.tensor([[19_999, 199, 19_998], [5, 3, 7], [100, 10, 3]])
    known = kg_queries(triples, num_entities=20_000, num_relations=200)
    head, relation, tail = triples.unbind(1)
    for dtype in (torch.int32, torch.int16):
        ids = [t.to(dtype) for t in (head, relation, tail)]
        assert known.contains(*ids).all(), dtype
        assert torch.equal(known.find(*ids[:2]), known.find(head, relation)), dtype


def test_queries_take_uint8_ids_and_indices():
    known = kg_queries(torch.tensor([[3, 0, 200], [7, 1, 3]]), num_entities=300, num_relations=2)
    byte = torch.uint8
    # A bound of 300 wrapped to 44 in a uint8 comparison: entity 200 was "out of range".
    assert known.find(torch.tensor([200], dtype=byte), torch.tensor([2], dtype=byte)).item() >= 0
    # A uint8 index selected as a mask, not as query positions.
    index = torch.tensor([0, 2])
    rows, answers = known.answer_pairs(index.to(byte))
    assert torch.equal(answers, known.answer_pairs(index)[1])
    assert rows.tolist() == [0, 1]


def test_filtered_ranks_read_uint8_answers_as_ids():
    scores = torch.tensor([[0.9, 0.1], [0.2, 0.8]])
    answers = torch.tensor([1, 1])
    expected = filtered_ranks(scores, answers)
    assert expected.tolist() == [2.0, 1.0]
    for dtype in NARROW:
        assert torch.equal(filtered_ranks(scores, answers.to(dtype)), expected), dtype


def test_link_predictor_scores_narrow_ids_as_int64_ones():
    triples = torch.tensor([[0, 0, 1], [1, 0, 2], [2, 1, 2]])
    torch.manual_seed(0)
    model = KGLinkPredictor(CompGCNEncoder(3, 2, triples, dim=8, init_dim=4), DistMultDecoder(3, 8))
    model.eval()
    entity, relation = torch.tensor([2, 2, 1]), torch.tensor([0, 1, 2])
    expected = model(entity, relation)
    scorer = model.scorer()
    for dtype in NARROW:
        narrow = entity.to(dtype), relation.to(dtype)
        assert torch.equal(model(*narrow), expected), dtype
        assert torch.equal(scorer(*narrow), expected), dtype


def test_link_split_stores_int64_pairs():
    graph = Graph.from_edge_index(torch.tensor([[0, 1], [1, 2]]), 4, symmetrize=True)
    pairs = torch.tensor([[0, 1], [1, 2]], dtype=torch.uint8)
    split = LinkSplit(graph, pairs, pairs, pairs, pairs, pairs)
    # Consumers index embeddings with them: z[uint8] selects as a mask.
    assert split.test_pos.dtype == torch.int64
    assert split.test_pos.tolist() == [[0, 1], [1, 2]]


def test_cli_refuses_a_dataset_without_attributes_in_one_line(tmp_path, monkeypatch, capsys):
    pin_folder(monkeypatch, "wn18rr", write_wn18rr(tmp_path / "wn18rr"))
    argv = ["run", "--dataset", "wn18rr", "--root", str(tmp_path), "--encoder", "compgcn"]
    assert main([*argv, "--option", "attributes=False", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "attributes=False" in err and "Traceback" not in err


def test_cli_refuses_a_conve_kernel_larger_than_the_image_in_one_line(
    tmp_path, monkeypatch, capsys
):
    pin_folder(monkeypatch, "wn18rr", write_wn18rr(tmp_path / "wn18rr"))
    argv = ["run", "--dataset", "wn18rr", "--root", str(tmp_path), "--encoder", "compgcn"]
    # The default image is 20 x 20 (k_w=10, k_h=20): a 21-wide kernel cannot slide on it.
    assert main([*argv, "--model-option", "kernel_size=21", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "kernel_size=21" in err and "20 x 20" in err and "Traceback" not in err


def _small_kg_trainer():
    triples = torch.tensor([[0, 0, 1], [1, 1, 2], [2, 0, 3], [3, 1, 0], [1, 0, 3], [2, 1, 0]])
    torch.manual_seed(0)
    encoder = CompGCNEncoder(4, 2, triples, dim=8, init_dim=4)
    model = KGLinkPredictor(encoder, DistMultDecoder(4, 8))
    head = OneToNHead(model)
    trainer = GALTrainer(
        encoder, head, torch.nn.Linear(8, 2), task_loss=OneToNLoss(), lr=0.05, lam=0
    )
    batches = OneToNBatches(kg_queries(triples, 4, 2), batch_size=3, seed=7)
    graph = Graph.from_edge_index(triples[:, [0, 2]].t(), 4, symmetrize=True)
    return trainer, batches, graph


def test_seeded_batches_resume_at_the_trainers_epoch(tmp_path):
    trainer, batches, graph = _small_kg_trainer()
    trainer.fit(graph, batches, epochs=3, progress=False)
    uninterrupted = trainer.embed()

    trainer, batches, graph = _small_kg_trainer()
    trainer.fit(graph, batches, epochs=1, progress=False)
    trainer.save_checkpoint(tmp_path / "run.pt")
    resumed, batches, graph = _small_kg_trainer()
    resumed.load_checkpoint(tmp_path / "run.pt")
    # Fresh batches start at epoch 0: the resumed run replayed epoch 0's order.
    resumed.fit(graph, batches, epochs=3, progress=False)
    assert torch.equal(resumed.embed(), uninterrupted)


def test_set_epoch_refuses_what_is_no_epoch():
    _, batches, _ = _small_kg_trainer()
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="epoch"):
            batches.set_epoch(bad)


def test_distmult_bias_must_be_a_flag():
    assert DistMultDecoder(5, 4, bias=False).bias is None
    for bad in ("no", None, 2):
        with pytest.raises(ValueError, match="bias"):
            DistMultDecoder(5, 4, bias=bad)
