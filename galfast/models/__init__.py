"""Ready-made pieces of the paper's models: decoders, the attacker MLP, the embedding encoder."""
# Knowledge graphs: ConvE / DistMult 1-N decoders, their loss, queries and filtered ranking.

from galfast.models.attacker import AttackerMLP
from galfast.models.compgcn_encoder import CompGCNEncoder
from galfast.models.conve_decoder import ConvEDecoder
from galfast.models.distmult_decoder import DistMultDecoder
from galfast.models.embedding_encoder import EmbeddingEncoder
from galfast.models.kg_link_predictor import KGLinkPredictor
from galfast.models.kg_queries import KGQueries, kg_queries, with_inverses
from galfast.models.link_decoder import DotProductLinkDecoder
from galfast.models.link_ranking import (
    TIES,
    LinkRanking,
    RankMetrics,
    evaluate_link_prediction,
    filtered_ranks,
)
from galfast.models.mpnn import MPNN
from galfast.models.one_to_n_loss import one_to_n_loss, smooth_labels
from galfast.models.rating_decoder import BilinearRatingDecoder

__all__ = ["AttackerMLP", "BilinearRatingDecoder", "DotProductLinkDecoder", "EmbeddingEncoder"]
__all__ += [
    "TIES",
    "ConvEDecoder",
    "DistMultDecoder",
    "KGQueries",
    "LinkRanking",
    "RankMetrics",
    "evaluate_link_prediction",
    "filtered_ranks",
    "kg_queries",
    "one_to_n_loss",
    "smooth_labels",
    "with_inverses",
]
__all__ += ["MPNN"]
__all__ += ["CompGCNEncoder", "KGLinkPredictor"]
