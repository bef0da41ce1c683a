"""Event-time partial compaction: schedule (plan), execute (Spark); rolled back by engine.services.rollback."""
from engine.compaction.execute import CompactionError, run_compaction
from engine.compaction.freshness_math import compute_ro_times
from engine.compaction.log_event_times import LogEventTime, resolve_log_event_times
from engine.compaction.plan import ScheduledPlan, schedule_compaction
from engine.compaction.strategy import (
                                        CompactionStrategy,
                                        EventTimeBasedCompactionStrategy,
                                        LogCandidate,
                                        PlannedOperation,
                                        SizeBasedStrategy,
                                        SliceCandidate,
                                        UnboundedStrategy,
                                        strategy_for,
)
from engine.compaction.trigger import check_event_time_trigger
from engine.results import CompactionResult

__all__ = [
    "CompactionError", "CompactionResult", "CompactionStrategy", "EventTimeBasedCompactionStrategy",
    "LogCandidate", "LogEventTime", "PlannedOperation", "ScheduledPlan",
    "SizeBasedStrategy", "SliceCandidate", "UnboundedStrategy", "check_event_time_trigger", "compute_ro_times",
    "resolve_log_event_times", "run_compaction", "schedule_compaction", "strategy_for",
]
