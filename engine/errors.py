"""Exception hierarchy: every user-facing failure is a TidemarkError naming the problem."""


class TidemarkError(Exception):
    """Base class of every error Tidemark reports to a user."""


class ConfigError(TidemarkError):
    """A malformed or unknown configuration key or value."""


class TableNotFoundError(TidemarkError):
    """The path holds no Hudi table."""


class UnsupportedTableError(TidemarkError):
    """A Hudi table this version of Tidemark cannot handle (e.g. table version 8)."""


class CorruptLogBlockError(TidemarkError):
    """A log block failed its length or trailer check."""


class CompactionRefused(TidemarkError):
    """The trigger refused to schedule a compaction; names the blocking instant."""

    def __init__(self, reason: str, blocking_instant: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.blocking_instant = blocking_instant
