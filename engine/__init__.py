"""Tidemark: event-time partial compaction for Apache Hudi Merge-On-Read tables.

The public API is `Table` (engine.table); see docs/PYTHON-API.md.
"""
from engine.config.choices import CarryOver, CleanerPolicy, StrategyName
from engine.config.discovery import FoundTable
from engine.config.eventtime import FUTURE_GRACE as THRESHOLD_FUTURE_GRACE
from engine.config.properties import SUPPORTED_TABLE_VERSIONS, WRITE_SETTINGS
from engine.errors import Cancelled, ConfigError, RefusalReason, Refused, TableNotFoundError, TidemarkError
from engine.humanize import human
from engine.io.storage import is_remote as is_object_store
from engine.io.storage import is_store_client_error, is_within, split_locations
from engine.io.storage import resolve as resolve_location
from engine.lock import FileLock, TableLock
from engine.observe.changes import TimelineMark
from engine.results import (
                            BacklogMetrics,
                            CarriedLog,
                            CleanResult,
                            CompactionPlan,
                            CompactionResult,
                            CompactionSummary,
                            FileGroupOperation,
                            Freshness,
                            InstantDetail,
                            InstantInfo,
                            ReadResult,
                            RecoverResult,
                            RollbackResult,
                            SettingUsed,
                            TableActivity,
                            TableDescription,
                            TideBucket,
                            WriteResult,
)
from engine.table import Table, compaction_threshold, latency_ms, threshold_ms

__all__ = [
    "BacklogMetrics", "Cancelled", "CarriedLog", "ConfigError", "CarryOver", "CleanerPolicy", "CleanResult", "CompactionPlan",
    "CompactionResult", "CompactionSummary", "StrategyName",
    "FileGroupOperation", "FileLock", "FoundTable", "Freshness", "InstantDetail", "InstantInfo", "ReadResult",
    "RecoverResult", "RefusalReason", "Refused", "RollbackResult", "SettingUsed", "Table", "TableActivity", "TableDescription", "TableLock",
    "TableNotFoundError", "TidemarkError", "TideBucket", "TimelineMark", "WriteResult", "compaction_threshold", "human",
    "SUPPORTED_TABLE_VERSIONS", "THRESHOLD_FUTURE_GRACE", "WRITE_SETTINGS", "is_object_store", "is_store_client_error",
    "is_within", "latency_ms", "resolve_location", "split_locations", "threshold_ms",
]
