"""The fixed sets a table setting or a plan chooses from, named once: the `--config` validation, the CLI's
`choices`, the control plane's forms and models, and the API's OpenAPI enums are all built from (or checked
against) these, so a new member cannot reach one of them and miss another.

They are `StrEnum`s: a member is its Hudi string (`CarryOver.COPY == "copy"`), so plans, JSON and
`hoodie.properties` hold exactly what they held before.
"""
from __future__ import annotations

from enum import StrEnum


class CarryOver(StrEnum):
    """How a log the plan does not compact reaches the new slice (`hoodie.compaction.carry.over.mode`)."""

    SYMLINK = "symlink"
    COPY = "copy"


class StrategyName(StrEnum):
    """Which logs a plan compacts (`hoodie.compaction.strategy`)."""

    EVENT_TIME = "event_time"
    SIZE = "size"
    UNBOUNDED = "unbounded"


class CleanerPolicy(StrEnum):
    """What a clean keeps (`hoodie.cleaner.policy`), Java's names."""

    KEEP_LATEST_COMMITS = "KEEP_LATEST_COMMITS"
    KEEP_LATEST_FILE_VERSIONS = "KEEP_LATEST_FILE_VERSIONS"
    KEEP_LATEST_BY_HOURS = "KEEP_LATEST_BY_HOURS"


class BlockFormat(StrEnum):
    """The data block format of new log files (`hoodie.logfile.data.block.format`)."""

    AVRO = "avro"
    PARQUET = "parquet"


# Hudi's five meta columns, in the order every Hudi record schema starts with them.
META_FIELDS: tuple[str, ...] = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
                                "_hoodie_partition_path", "_hoodie_file_name")
