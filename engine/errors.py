"""Exception hierarchy: every user-facing failure is a TidemarkError naming the problem."""
from __future__ import annotations

from enum import StrEnum


class TidemarkError(Exception):
    """Base class of every error Tidemark reports to a user."""


class ConfigError(TidemarkError):
    """A malformed or unknown configuration key or value."""


class TableNotFoundError(TidemarkError):
    """The path holds no Hudi table."""


class UnsupportedTableError(TidemarkError):
    """A Hudi table this version of Tidemark cannot handle (e.g. table version 8)."""


class CorruptLogBlockError(TidemarkError):
    """A log block of a committed instant is corrupt (framing or content): the operation would lose or hide its
    records, so it stopped. The message names each block's file and offset."""


class TidemarkWarning(UserWarning):
    """Base class of Tidemark's warnings (the CLI prints them as `tidemark: warning: ...`)."""


class RefusalReason(StrEnum):
    """Why the engine refused an operation: stable codes callers dispatch on (the CLI exits 3 with one, the
    control plane records and counts them, the API documents them). Nothing was changed by a refused call."""

    PENDING_COMPACTION = "pending_compaction"
    PENDING_CLUSTERING = "pending_clustering"
    PENDING_WRITE = "pending_write"
    PENDING_SERVICE = "pending_service"
    LOCK_UNAVAILABLE = "lock_unavailable"
    LOCK_LOST = "lock_lost"
    COMPACTION_RUNNING = "compaction_running"
    NEWER_INSTANT = "newer_instant"
    ROLLBACK_DEPENDENCY = "rollback_dependency"
    UNKNOWN_INSTANT = "unknown_instant"
    ALREADY_COMPLETED = "already_completed"
    NOT_ROLLBACKABLE = "not_rollbackable"
    SAVEPOINT_PRESENT = "savepoint_present"
    BROKEN_CARRY_OVER = "broken_carry_over"
    UNREADABLE_PLAN = "unreadable_plan"
    FOREIGN_FILE_SYSTEM = "foreign_file_system"
    ALREADY_PUBLISHED = "already_published"   # another writer created the same instant file first
    UNSAFE_PUBLISH = "unsafe_publish"   # a store without conditional put and no lock outside it
    INVALID_PLAN = "invalid_plan"   # a pending plan fails validation (compaction admin)
    INTERRUPTED_UNSCHEDULE = "interrupted_unschedule"   # an unschedule stopped half-way: repair it first


# The codes by name, as the modules that raise them import them.
PENDING_COMPACTION = RefusalReason.PENDING_COMPACTION
PENDING_CLUSTERING = RefusalReason.PENDING_CLUSTERING
PENDING_WRITE = RefusalReason.PENDING_WRITE
PENDING_SERVICE = RefusalReason.PENDING_SERVICE
LOCK_UNAVAILABLE = RefusalReason.LOCK_UNAVAILABLE
LOCK_LOST = RefusalReason.LOCK_LOST
COMPACTION_RUNNING = RefusalReason.COMPACTION_RUNNING
NEWER_INSTANT = RefusalReason.NEWER_INSTANT
ROLLBACK_DEPENDENCY = RefusalReason.ROLLBACK_DEPENDENCY
UNKNOWN_INSTANT = RefusalReason.UNKNOWN_INSTANT
ALREADY_COMPLETED = RefusalReason.ALREADY_COMPLETED
NOT_ROLLBACKABLE = RefusalReason.NOT_ROLLBACKABLE
SAVEPOINT_PRESENT = RefusalReason.SAVEPOINT_PRESENT
BROKEN_CARRY_OVER = RefusalReason.BROKEN_CARRY_OVER
UNREADABLE_PLAN = RefusalReason.UNREADABLE_PLAN
FOREIGN_FILE_SYSTEM = RefusalReason.FOREIGN_FILE_SYSTEM
ALREADY_PUBLISHED = RefusalReason.ALREADY_PUBLISHED
UNSAFE_PUBLISH = RefusalReason.UNSAFE_PUBLISH
INVALID_PLAN = RefusalReason.INVALID_PLAN
INTERRUPTED_UNSCHEDULE = RefusalReason.INTERRUPTED_UNSCHEDULE


class Refused(TidemarkError):
    """The operation was not done because the table's state (or its lock) does not allow it now.

    `reason` is a stable code (see the constants above), `message` says why in words, and
    `blocking_instant` names the instant in the way when there is one. Nothing was changed.
    """

    def __init__(self, reason: str, message: str, blocking_instant: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.blocking_instant = blocking_instant

    def to_dict(self) -> dict[str, str | None]:
        return {"refused": self.reason, "message": self.message, "blocking_instant": self.blocking_instant}


class CompactionRefused(Refused):
    """Scheduling was refused by the serial trigger; names the blocking instant."""


class CleanRefused(Refused):
    """The table cannot be cleaned safely right now."""


class RollbackRefused(Refused):
    """An instant cannot be rolled back safely (a later instant depends on it, its writer is alive, or it is
    not a deltacommit or compaction)."""


class WriteRefused(Refused):
    """A write cannot start now (an overwrite while a compaction or clustering is pending)."""


class Cancelled(TidemarkError):
    """The caller asked a running compaction to stop (`should_stop`): the file groups being written were
    finished, no further one started, the inflight plan was rolled back and nothing was committed."""

    def __init__(self, instant: str, message: str) -> None:
        super().__init__(message)
        self.instant = instant
        self.message = message


class InputError(TidemarkError):
    """Input rows that cannot go into the table (unreadable file, missing column, bad value); nothing was written."""
