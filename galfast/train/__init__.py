"""GAL training: the minimax trainer with its batches, task heads and losses, callbacks and
checkpointed config. The GAL core it builds on (sensitive attributes, pairing, adversary
losses) lives in :mod:`galfast.gal` and is re-exported here, as are :class:`GradReverse` and
:class:`EdgeIndexAdapter` from :mod:`galfast.nn`.
"""

from galfast.gal.adversary_losses import adversary_loss, clip_weights, tv_loss, wasserstein_gap
from galfast.gal.pairing import Pairing, pair_nodes, parse_pairing
from galfast.gal.sensitive import SensitiveAttribute
from galfast.nn.edge_index_adapter import EdgeIndexAdapter
from galfast.nn.grad_reverse import GradReverse, grad_reverse
from galfast.train.batches import (
    GraphBatch,
    GraphBatches,
    LinkBatch,
    LinkBatches,
    NodeBatch,
    NodeBatches,
    RatingBatch,
    RatingBatches,
)
from galfast.train.callbacks import Callback, CheckpointEvery, EarlyStopping, EvaluateEvery, History
from galfast.train.config import GALConfig
from galfast.train.distributed import init_distributed
from galfast.train.kg_batches import OneToNBatch, OneToNBatches
from galfast.train.kg_tasks import OneToNHead, OneToNLoss
from galfast.train.sampling import NeighborSampling
from galfast.train.tasks import (
    EdgeHead,
    GraphHead,
    NodeHead,
    classification_loss,
    link_loss,
    rating_cross_entropy,
    rating_mse,
    regression_loss,
)
from galfast.train.trainer import GALTrainer, LossDiverged

__all__ = [
    "Callback",
    "CheckpointEvery",
    "EarlyStopping",
    "EdgeHead",
    "EdgeIndexAdapter",
    "EvaluateEvery",
    "GALConfig",
    "GALTrainer",
    "GradReverse",
    "GraphBatch",
    "GraphBatches",
    "GraphHead",
    "History",
    "LinkBatch",
    "LinkBatches",
    "LossDiverged",
    "NodeBatch",
    "NodeBatches",
    "NodeHead",
    "OneToNBatch",
    "OneToNBatches",
    "Pairing",
    "RatingBatch",
    "RatingBatches",
    "SensitiveAttribute",
    "adversary_loss",
    "classification_loss",
    "clip_weights",
    "grad_reverse",
    "link_loss",
    "pair_nodes",
    "parse_pairing",
    "rating_cross_entropy",
    "rating_mse",
    "regression_loss",
    "tv_loss",
    "wasserstein_gap",
]
__all__ += ["OneToNHead", "OneToNLoss"]
__all__ += ["NeighborSampling"]
__all__ += ["init_distributed"]
