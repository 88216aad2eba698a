"""Ready-made pieces of the paper's models: decoders, the attacker MLP, the embedding encoder."""

from galfast.models.attacker import AttackerMLP
from galfast.models.embedding_encoder import EmbeddingEncoder
from galfast.models.link_decoder import DotProductLinkDecoder
from galfast.models.mpnn import MPNN
from galfast.models.rating_decoder import BilinearRatingDecoder

__all__ = ["AttackerMLP", "BilinearRatingDecoder", "DotProductLinkDecoder", "EmbeddingEncoder"]
__all__ += ["MPNN"]
