"""Which instants count as committed: the completed writes of the active timeline and, once instants were
archived, every instant before the active timeline starts.

Archival moves only completed instants off the active timeline, so a base file or log block whose instant sorts
before the first commit/deltacommit/replacecommit still on it (in any state) was written by a commit that
completed: Java's `containsInstant(ts) || isBeforeTimelineStarts(ts)`, hudi-rs's `archived_boundary`
(crates/core/src/timeline/mod.rs, the same three actions). Without it every file of an archived commit would look
like a failed write's leftover and vanish from reads. The rule applies only when something was archived
(`Timeline.has_archive`), asked lazily on the first instant below the start, so a table never archived pays
nothing and answers exactly as before.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any


class CommittedInstants(frozenset[str]):
    """A frozen set of committed instant times that also holds every time before `start` once `archived()`."""

    start: str | None
    _archived: Callable[[], bool] | bool

    def __new__(cls, items: Iterable[str], start: str | None = None,
                archived: Callable[[], bool] | bool = False) -> CommittedInstants:
        out = super().__new__(cls, items)
        out.start, out._archived = start, archived
        return out

    def __contains__(self, ts: object) -> bool:
        if frozenset.__contains__(self, ts):
            return True
        return isinstance(ts, str) and self.start is not None and ts < self.start and self.archived

    @property
    def archived(self) -> bool:
        """Whether the table archived instants (asked once, then kept)."""
        if callable(self._archived):
            self._archived = bool(self._archived())
        return self._archived

    def __or__(self, other: Iterable[Any]) -> CommittedInstants:
        return CommittedInstants(frozenset.__or__(self, frozenset(other)), self.start, self._archived)

    def before(self, instant: str) -> CommittedInstants:
        """The committed instants strictly before `instant` (archived ones included)."""
        start = min(self.start, instant) if self.start is not None else None
        return CommittedInstants((t for t in self if t < instant), start, self._archived)

    def __reduce__(self) -> tuple[Any, ...]:
        # Shipped to Spark executors resolved: they cannot reach the driver's storage client.
        return (CommittedInstants, (frozenset(self), self.start, self.archived))
