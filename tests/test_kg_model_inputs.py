"""Bad ids and dtypes reaching the knowledge-graph ranking and model code raise a ValueError
naming the problem, instead of ranking or scoring another entity or a raw torch error."""

from __future__ import annotations

import pytest
import torch

from galfast.models import (
    CompGCNEncoder,
    ConvEDecoder,
    DistMultDecoder,
    KGLinkPredictor,
    evaluate_link_prediction,
    filtered_ranks,
    kg_queries,
)

TRIPLES = torch.tensor([[0, 0, 1], [1, 0, 2], [0, 0, 1]])
SCORES = torch.tensor([[0.9, 0.5, 0.5, 0.1]])


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        (torch.tensor([-1]), r"entity id outside \[0, 4\)"),
        (torch.tensor([4]), r"entity id outside \[0, 4\)"),
        (torch.tensor([1.0]), "integer entity ids"),
        (torch.tensor([True]), "integer entity ids"),
    ],
)
def test_filtered_ranks_refuses_bad_answers(answers, message):
    with pytest.raises(ValueError, match=message):
        filtered_ranks(SCORES, answers)


def test_filtered_ranks_refuses_scores_without_entities_and_takes_int32():
    with pytest.raises(ValueError, match="at least one entity"):
        filtered_ranks(torch.zeros(1, 0), torch.tensor([0]))
    assert filtered_ranks(SCORES, torch.tensor([1], dtype=torch.int32)).tolist() == [2.5]
    assert filtered_ranks(torch.zeros(0, 4), torch.zeros(0, dtype=torch.int64)).numel() == 0


def test_queries_refuse_ids_that_would_alias_another_key():
    q = kg_queries(TRIPLES, 3, 1)
    with pytest.raises(ValueError, match=r"relation holds an id outside \[0, 2\)"):
        q.find(torch.tensor([0]), torch.tensor([2]))  # packs to the key of (1, 0)
    with pytest.raises(ValueError, match="relation holds an id"):
        q.find(torch.tensor([1]), torch.tensor([-1]))
    with pytest.raises(ValueError, match=r"entity holds an id outside \[0, 3\)"):
        q.find(torch.tensor([3]), torch.tensor([0]))
    with pytest.raises(ValueError, match=r"answer holds an id outside \[0, 3\)"):
        q.contains(torch.tensor([1]), torch.tensor([0]), torch.tensor([3]))
    with pytest.raises(ValueError, match="integers"):
        q.find(torch.tensor([0.0]), torch.tensor([0]))
    with pytest.raises(ValueError, match="same shape"):
        q.contains(torch.tensor([0, 1]), torch.tensor([0]), torch.tensor([1]))
    with pytest.raises(ValueError, match=r"query index outside \[-1, 4\)"):
        q.answer_pairs(torch.tensor([99]))
    with pytest.raises(ValueError, match="query index outside"):
        q.targets(torch.tensor([-2]))
    # Valid lookups are unchanged.
    assert q.find(torch.tensor([0, 2]), torch.tensor([0, 0])).tolist()[1] == -1
    assert q.contains(torch.tensor([0]), torch.tensor([0]), torch.tensor([1])).tolist() == [True]


def _model(decoder=None):
    encoder = CompGCNEncoder(3, 1, TRIPLES, dim=4, init_dim=4)
    return KGLinkPredictor(encoder, decoder or DistMultDecoder(3, 4)).eval()


@pytest.mark.parametrize(
    ("entity", "relation", "message"),
    [
        ([-1], [0], r"entity holds an id outside \[0, 3\)"),
        ([3], [0], r"entity holds an id outside \[0, 3\)"),
        ([0], [-1], r"relation holds an id outside \[0, 2\)"),
        ([0], [2], r"relation holds an id outside \[0, 2\)"),
    ],
)
@pytest.mark.parametrize("training", [False, True])
def test_predictor_refuses_out_of_range_ids(entity, relation, message, training):
    model = _model().train(training)
    entity, relation = torch.tensor(entity), torch.tensor(relation)
    with pytest.raises(ValueError, match=message):
        model(entity, relation)
    with pytest.raises(ValueError, match=message):
        model.eval().scorer()(entity, relation)


def test_predictor_refuses_bad_id_tensors():
    model = _model()
    with pytest.raises(ValueError, match="integers"):
        model(torch.tensor([0.0]), torch.tensor([0]))
    with pytest.raises(ValueError, match="same length"):
        model(torch.tensor([0, 1]), torch.tensor([0]))
    with pytest.raises(ValueError, match=r"\[B\] tensor"):
        model.scorer()(torch.tensor([[0]]), torch.tensor([[0]]))
    assert model(torch.tensor([0]), torch.tensor([1])).shape == (1, 3)


def test_evaluation_refuses_a_filter_built_for_another_graph():
    scorer = _model().scorer()
    with pytest.raises(ValueError, match="num_relations=2 but the scorer's model has"):
        evaluate_link_prediction(scorer, TRIPLES, kg_queries(TRIPLES, 3, 2))
    with pytest.raises(ValueError, match="num_entities=4 but the scorer's model has"):
        evaluate_link_prediction(scorer, TRIPLES, kg_queries(TRIPLES, 4, 1))
    assert evaluate_link_prediction(scorer, TRIPLES, kg_queries(TRIPLES, 3, 1)).both.count == 6


def test_conve_refuses_inputs_of_another_dtype_than_its_parameters():
    decoder = ConvEDecoder(3, 8, k_w=2, k_h=4, num_filters=2, kernel_size=3).eval()
    head, relation, entities = torch.ones(2, 8), torch.ones(2, 8), torch.ones(3, 8)
    with pytest.raises(ValueError, match="float64 but the decoder's parameters are torch.float32"):
        decoder(head.double(), relation.double(), entities.double())
    assert decoder.double()(head.double(), relation.double(), entities.double()).shape == (2, 3)
