"""The fixed vocabularies of a Hudi timeline: its instants' actions and states.

Both are StrEnums: a member is the string Hudi writes (`Action.DELTACOMMIT == "deltacommit"`, and f-strings,
json.dumps and str() give the bare value), so file names and JSON stay byte for byte what they were while
callers compare and dispatch on names instead of literals.
"""

from __future__ import annotations

from enum import StrEnum


class Action(StrEnum):
    """An instant's action, as the extension of its file names (HoodieTimeline's action constants)."""

    COMMIT = "commit"
    DELTACOMMIT = "deltacommit"
    COMPACTION = "compaction"
    CLEAN = "clean"
    ROLLBACK = "rollback"
    REPLACECOMMIT = "replacecommit"
    CLUSTERING = "clustering"   # layout 2: a pending clustering (completes as a replacecommit)
    LOGCOMPACTION = "logcompaction"
    INDEXING = "indexing"
    SAVEPOINT = "savepoint"
    RESTORE = "restore"


class State(StrEnum):
    """An instant's state, in the order an instant goes through them. Ordered by that progress, not by the
    strings (which would put "completed" first): `_merge_latest` keeps the most advanced state of an instant."""

    REQUESTED = "requested"
    INFLIGHT = "inflight"
    COMPLETED = "completed"

    @property
    def rank(self) -> int:
        return _PROGRESS.index(self)

    # str's comparisons would apply to a StrEnum; all four are replaced so that `>` is never alphabetical.
    def __lt__(self, other: object) -> bool:
        return self.rank < other.rank if isinstance(other, State) else NotImplemented

    def __le__(self, other: object) -> bool:
        return self.rank <= other.rank if isinstance(other, State) else NotImplemented

    def __gt__(self, other: object) -> bool:
        return self.rank > other.rank if isinstance(other, State) else NotImplemented

    def __ge__(self, other: object) -> bool:
        return self.rank >= other.rank if isinstance(other, State) else NotImplemented


_PROGRESS = tuple(State)   # declaration order is the order an instant goes through its states
