"""Hudi file and instant naming (docs/HUDI-FORMAT.md §2).

Base file:  ``<fileId>_<writeToken>_<instant><ext>``            (FSUtils.makeBaseFileName)
Log file:   ``.<fileId>_<baseInstant>.log.<version>_<writeToken>`` (FSUtils.makeLogFileName)
Instants:   ``yyyyMMddHHmmssSSS`` (17 digits); 14-digit second-precision instants are legacy.
"""

from __future__ import annotations

import re
import threading
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

# Extensions Hudi writes for base files; anything else is not a base file for us.
BASE_FILE_EXTENSIONS: tuple[str, ...] = (".parquet", ".orc", ".hfile", ".lance")

# Java FSUtils.LOG_FILE_PATTERN, anchored at both ends so temp/garbage suffixes don't match.
_LOG_FILE_RE = re.compile(
    r"^\.(?P<fid>.+)_(?P<inst>.*)\.(?P<kind>log|archive)\.(?P<ver>\d+)"
    r"(?:_(?P<tok>\d+-\d+-\d+)(?P<cdc>\.cdc)?)?$"
)
# Split on "_" the way Java (FSUtils.getFileId/getCommitTime) and hudi-rs do.
_BASE_FILE_RE = re.compile(
    r"^(?P<fid>[^_./][^_/]*)_(?P<tok>[^_/]+)_(?P<inst>\d{14}|\d{17})(?P<ext>\.[A-Za-z0-9]+)$"
)
_INSTANT_RE = re.compile(r"^(\d{14}|\d{17})$")
_INSTANT_FMT = "%Y%m%d%H%M%S"


@dataclass(frozen=True)
class BaseFileName:
    """A parsed base file name."""

    file_id: str
    write_token: str
    instant: str
    ext: str = ".parquet"

    @property
    def name(self) -> str:
        return f"{self.file_id}_{self.write_token}_{self.instant}{self.ext}"


@dataclass(frozen=True)
class LogFileName:
    """A parsed log file name; `base_instant` is the slice's base instant in table version 6."""

    file_id: str
    base_instant: str
    version: int
    write_token: str

    @property
    def name(self) -> str:
        # Very old Hudi wrote logs without a token; keep such names round-trippable.
        suffix = f"_{self.write_token}" if self.write_token else ""
        return f".{self.file_id}_{self.base_instant}.log.{self.version}{suffix}"


def parse_base_file_name(name: str) -> BaseFileName | None:
    """Parse ``<fid>_<token>_<instant>.<ext>``; None for anything else (logs, metadata, temp files)."""
    m = _BASE_FILE_RE.match(name)
    if m is None or m.group("ext") not in BASE_FILE_EXTENSIONS:
        return None
    return BaseFileName(m.group("fid"), m.group("tok"), m.group("inst"), m.group("ext"))


def parse_log_file_name(name: str) -> LogFileName | None:
    """Parse a data log file name; archive logs and CDC logs are not data logs, so they give None."""
    m = _LOG_FILE_RE.match(name)
    if m is None or m.group("kind") != "log" or m.group("cdc"):
        return None
    return LogFileName(m.group("fid"), m.group("inst"), int(m.group("ver")), m.group("tok") or "")


def new_file_id(bucket: int | None = None) -> str:
    """A fresh file id ``<uuid4>-0``; with a bucket, Hudi's bucket-index form ``%08d<uuid[8:]>-0``."""
    u = str(uuid.uuid4())
    if bucket is None:
        return f"{u}-0"
    if not 0 <= bucket <= 99_999_999:
        raise ValueError(f"bucket {bucket} does not fit the 8-digit bucket prefix")
    # BucketIdentifier.newBucketFileIdPrefix: the first 8 uuid chars are replaced by the bucket.
    return f"{bucket:08d}{u[8:]}-0"


def bucket_of_file_id(file_id: str) -> int | None:
    """Bucket number of a bucket-index file id (first 8 chars all digits, then '-'), else None.

    Like Java's BucketIdentifier this cannot tell a random uuid that happens to start with
    8 decimal digits from a bucket id; callers should only ask on bucket-index tables.
    """
    head = file_id[:8]
    if len(file_id) > 8 and file_id[8] == "-" and head.isdigit() and head.isascii():
        return int(head)
    return None


def write_token(partition_id: int, stage_id: int, attempt_id: int) -> str:
    """FSUtils.makeWriteToken: ``<taskPartitionId>-<stageId>-<taskAttemptId>``."""
    return f"{partition_id}-{stage_id}-{attempt_id}"


def is_instant(value: str) -> bool:
    """True for a 14- or 17-digit instant string."""
    return bool(_INSTANT_RE.match(value))


def instant_to_millis(instant: str) -> int:
    """Epoch millis (UTC) of an instant; 14-digit instants have second precision."""
    if not is_instant(instant):
        raise ValueError(f"not a Hudi instant time: {instant!r}")
    dt = datetime.strptime(instant[:14], _INSTANT_FMT).replace(tzinfo=UTC)
    millis = int(instant[14:]) if len(instant) == 17 else 0
    return int(dt.timestamp()) * 1000 + millis


def millis_to_instant(ms: int) -> str:
    """17-digit UTC instant for epoch millis."""
    secs, millis = divmod(ms, 1000)
    dt = datetime.fromtimestamp(secs, tz=UTC)
    return f"{dt.strftime(_INSTANT_FMT)}{millis:03d}"


_last_clock_ms = 0
_issue_lock = threading.Lock()


def new_instant_time(after: str | None = None) -> str:
    """A new 17-digit UTC instant, strictly after `after` and after every clock reading this process issued.

    Instants must be unique and increasing on the timeline; two writers in one process (or a clock that went
    backwards) must not produce a duplicate, so the clock part is bumped by 1 ms when needed. Only the clock
    is remembered process-wide, never `after`: one table whose timeline holds a future instant (a skewed
    writer's clock) must not move every later instant of every other table into that future — a worker would
    then compute "now" minus a table's data latency in the future and plan, and publish, data it must not.
    Callers pass the table's newest instant as `after` and create the instant under the table's lock.
    """
    global _last_clock_ms
    now = int(datetime.now(tz=UTC).timestamp() * 1000)
    with _issue_lock:
        clock = max(now, _last_clock_ms + 1)
        _last_clock_ms = clock
    floor = instant_to_millis(after) + 1 if after is not None else 0
    return millis_to_instant(max(clock, floor))


# Log version 1 of a compaction's slice C is kept for the compaction's carry-forward log (deletes and
# exact-mode versions it must not fold into the base); writes and carried-over logs come after it.
CARRY_FORWARD_VERSION = 1
