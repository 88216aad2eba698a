"""Post-hoc auditing: worst-case attackers on frozen embeddings, with a printable report."""

from galfast.audit.audit_embeddings import STRENGTHS, WalksFailed, audit
from galfast.audit.bounds import TradeoffBound, tradeoff_bound
from galfast.audit.report import AttackResult, AuditReport
from galfast.audit.search import SearchConfig
from galfast.audit.split import AUDIT_TEST_FRACTION, audit_split
from galfast.audit.stats import MetricSummary, summarize

__all__ = [
    "AUDIT_TEST_FRACTION",
    "AttackResult",
    "AuditReport",
    "MetricSummary",
    "STRENGTHS",
    "SearchConfig",
    "TradeoffBound",
    "WalksFailed",
    "audit",
    "audit_split",
    "summarize",
    "tradeoff_bound",
]
