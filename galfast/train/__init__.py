"""GAL training: the minimax trainer, its adversary losses, pairing, batches and callbacks."""

from galfast.gal.adversary_losses import adversary_loss, clip_weights, tv_loss, wasserstein_gap
from galfast.gal.pairing import Pairing, pair_nodes, parse_pairing
from galfast.gal.sensitive import SensitiveAttribute
from galfast.nn.edge_index_adapter import EdgeIndexAdapter
from galfast.nn.grad_reverse import GradReverse, grad_reverse
from galfast.train.callbacks import Callback, CheckpointEvery, EarlyStopping, EvaluateEvery
from galfast.train.edge_batches import LinkBatch, LinkBatches, RatingBatch, RatingBatches
from galfast.train.graph_batches import GraphBatch, GraphBatches
from galfast.train.history import History
from galfast.train.node_batches import NodeBatch, NodeBatches
from galfast.train.task_heads import EdgeHead, GraphHead, NodeHead
from galfast.train.task_losses import (
    classification_loss,
    link_loss,
    rating_cross_entropy,
    rating_mse,
    regression_loss,
)
from galfast.train.trainer import GALTrainer

__all__ = [
    "Callback",
    "CheckpointEvery",
    "EarlyStopping",
    "EdgeHead",
    "EdgeIndexAdapter",
    "EvaluateEvery",
    "GALTrainer",
    "GradReverse",
    "GraphBatch",
    "GraphBatches",
    "GraphHead",
    "History",
    "LinkBatch",
    "LinkBatches",
    "NodeBatch",
    "NodeBatches",
    "NodeHead",
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
