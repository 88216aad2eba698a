"""Post-hoc auditing: worst-case attackers on frozen embeddings, with a printable report."""

from galfast.audit.audit_embeddings import audit
from galfast.audit.bounds import TradeoffBound, tradeoff_bound
from galfast.audit.report import AttackResult, AuditReport
from galfast.audit.stats import MetricSummary, summarize

__all__ = [
    "AttackResult",
    "AuditReport",
    "MetricSummary",
    "TradeoffBound",
    "audit",
    "summarize",
    "tradeoff_bound",
]
