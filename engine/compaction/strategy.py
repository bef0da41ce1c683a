"""Compaction strategies: which logs of a slice to compact, and which slices to compact at all.

Every strategy only ever compacts a **prefix** of a slice's logs (log order = version, then write
token). Readers apply the base first and then the logs in order (docs/HUDI-FORMAT.md §5.2). Under commit-time
ordering, compacting a non-prefix subset lets an older, un-compacted log override newer values that
now sit in the base. Even under event-time ordering a processing-time delete ("always wins") followed
by a re-insert breaks if the two are reordered: the delete would erase the re-inserted row. A prefix
keeps the relative order of everything intact.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from engine.errors import ConfigError

MB = 1024 * 1024


@dataclass(frozen=True)
class LogCandidate:
    name: str
    path: str
    version: int
    write_token: str
    size: int
    min_event_time: int | None   # None: unknown (delete-only, no stats) -> treated as "must compact"
    max_event_time: int | None
    source: str
    has_deletes: bool = True     # a committed delete block (True: unknown)
    partial: bool = False        # a committed partial-update block (IS_PARTIAL)


@dataclass(frozen=True)
class SliceCandidate:
    partition_path: str
    file_id: str
    base_instant: str
    base_file_name: str | None
    base_file_path: str | None
    base_size: int
    logs: tuple[LogCandidate, ...]   # in log order

    @property
    def log_size(self) -> int:
        return sum(lf.size for lf in self.logs)


@dataclass(frozen=True)
class PlannedOperation:
    """One slice's split: the prefix to merge into the new base, the rest to carry over."""

    slice: SliceCandidate
    to_compact: tuple[LogCandidate, ...]
    to_remain: tuple[LogCandidate, ...]
    metrics: dict[str, float] = field(default_factory=dict)

    @property
    def compacted_size(self) -> int:
        return sum(lf.size for lf in self.to_compact)


def operation_metrics(sl: SliceCandidate, to_compact: tuple[LogCandidate, ...]) -> dict[str, float]:
    """The metrics Java's CompactionStrategy.captureMetrics records (sizes in MB, counts as doubles)."""
    log_bytes = sum(lf.size for lf in to_compact)
    read_mb = (sl.base_size + log_bytes) / MB
    write_mb = sl.base_size / MB
    return {"TOTAL_LOG_FILES": float(len(to_compact)), "TOTAL_IO_READ_MB": read_mb,
            "TOTAL_LOG_FILES_SIZE": float(log_bytes), "TOTAL_IO_WRITE_MB": write_mb,
            "TOTAL_IO_MB": read_mb + write_mb}


class CompactionStrategy(ABC):
    name: str = "abstract"

    @abstractmethod
    def filter_log_files(self, sl: SliceCandidate) -> tuple[tuple[LogCandidate, ...], tuple[LogCandidate, ...]]:
        """(to_compact, to_remain); to_compact must be a prefix of sl.logs."""

    def order_and_filter(self, ops: list[PlannedOperation]) -> list[PlannedOperation]:
        return ops

    def plan(self, slices: list[SliceCandidate]) -> list[PlannedOperation]:
        ops = []
        for sl in slices:
            to_compact, to_remain = self.filter_log_files(sl)
            if to_compact and to_remain and any(lf.partial for lf in sl.logs):
                # Partial updates make hudi's fold depend on the whole log sequence: a partial record that loses
                # on ordering still fills what the winner lacks, but only against log records, never against the
                # base; one after a delete takes the base row's other columns. A prefix folded into the base with
                # the rest replayed after it would read differently, so the group is compacted whole.
                to_compact, to_remain = tuple(sl.logs), ()
            if to_compact:
                assert sl.logs[: len(to_compact)] == to_compact, "strategies may only compact a prefix"
                ops.append(PlannedOperation(sl, to_compact, to_remain, operation_metrics(sl, to_compact)))
        return self.order_and_filter(ops)

    def params(self) -> dict[str, str]:
        return {}


class UnboundedStrategy(CompactionStrategy):
    """Every log of every slice (Hudi's UnBoundedCompactionStrategy)."""

    name = "unbounded"

    def filter_log_files(self, sl: SliceCandidate) -> tuple[tuple[LogCandidate, ...], tuple[LogCandidate, ...]]:
        return tuple(sl.logs), ()


class SizeBasedStrategy(CompactionStrategy):
    """Hudi's default LogFileSizeBasedCompactionStrategy.

    A slice qualifies when its total log size reaches `threshold_bytes`; qualifying slices are taken
    largest-log-size first until `target_io_mb` is used up (BoundedIO: the op crossing the limit is kept).
    """

    name = "size"

    def __init__(self, threshold_bytes: int = 0, target_io_mb: int = 512_000) -> None:
        if target_io_mb <= 0:
            raise ConfigError(f"hoodie.compaction.target.io must be positive, got {target_io_mb}")
        self.threshold_bytes = int(threshold_bytes)
        self.target_io_mb = int(target_io_mb)

    def filter_log_files(self, sl: SliceCandidate) -> tuple[tuple[LogCandidate, ...], tuple[LogCandidate, ...]]:
        if sl.logs and sl.log_size >= self.threshold_bytes:
            return tuple(sl.logs), ()
        return (), tuple(sl.logs)

    def order_and_filter(self, ops: list[PlannedOperation]) -> list[PlannedOperation]:
        remaining = float(self.target_io_mb)
        out: list[PlannedOperation] = []
        for op in sorted(ops, key=lambda o: o.compacted_size, reverse=True):
            out.append(op)
            remaining -= op.metrics.get("TOTAL_IO_MB", 0.0)
            if remaining <= 0:
                break
        return out

    def params(self) -> dict[str, str]:
        return {"threshold_bytes": str(self.threshold_bytes), "target_io_mb": str(self.target_io_mb)}


class EventTimeBasedCompactionStrategy(CompactionStrategy):
    """Compact the prefix of each slice's logs up to the last log whose min event time ≤ T.

    After it, no log left in the latest slices has min event time ≤ T, so the RO view holds every record
    with event time ≤ T (and possibly some later ones that shared a log with earlier data).
    """

    name = "event_time"

    def __init__(self, threshold_ms: int | None) -> None:
        if threshold_ms is None:
            raise ConfigError("the event_time strategy needs a threshold (or a data latency to derive it)")
        self.threshold_ms = int(threshold_ms)

    def filter_log_files(self, sl: SliceCandidate) -> tuple[tuple[LogCandidate, ...], tuple[LogCandidate, ...]]:
        cut = 0
        for i, lf in enumerate(sl.logs):
            if lf.min_event_time is None or lf.min_event_time <= self.threshold_ms:
                cut = i + 1
        return tuple(sl.logs[:cut]), tuple(sl.logs[cut:])

    def params(self) -> dict[str, str]:
        return {"threshold_ms": str(self.threshold_ms)}


STRATEGIES: dict[str, type[CompactionStrategy]] = {"event_time": EventTimeBasedCompactionStrategy, "size": SizeBasedStrategy,
              "unbounded": UnboundedStrategy}


def strategy_for(name: str, **params: int | None) -> CompactionStrategy:
    """A strategy by name: event_time(threshold_ms), size(threshold_bytes, target_io_mb), unbounded."""
    cls = STRATEGIES.get(name)
    if cls is None:
        raise ConfigError(f"unknown compaction strategy {name!r}; use one of {', '.join(STRATEGIES)}")
    if cls is UnboundedStrategy:
        return cls()
    try:
        return cls(**params)
    except TypeError as exc:
        raise ConfigError(f"bad parameters for compaction strategy {name!r}: {exc}") from None
