"""Table properties (`.hoodie/hoodie.properties`, table version 6) and Tidemark's write settings.

Table properties describe the table for every reader (Java Hudi, hudi-rs, us); write settings tune how
Tidemark writes and compacts it. Both are validated against a registry of known keys so that a typo
(`hoodie.logfile.max.sise`) is refused instead of silently ignored.
"""
from __future__ import annotations

import datetime as dt
import os
import re
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.config.choices import BlockFormat, CarryOver, CleanerPolicy, StrategyName
from engine.errors import ConfigError, TableNotFoundError, UnsupportedTableError
from engine.io import storage

HOODIE_DIR = ".hoodie"
INDEX_TYPE_KEY = "tidemark.index.type"
BUCKET_INDEX = "BUCKET_MURMUR3"
PROPERTIES_FILE = "hoodie.properties"
BACKUP_SUFFIX = ".backup"   # Java: hoodie.properties.backup

EVENT_TIME_ORDERING = "EVENT_TIME_ORDERING"
COMMIT_TIME_ORDERING = "COMMIT_TIME_ORDERING"
MERGE_MODES = {"event_time": EVENT_TIME_ORDERING, "commit_time": COMMIT_TIME_ORDERING}
# Table version 6 has no merge-mode property of its own: Java derives the behaviour from the payload class.
PAYLOAD_FOR_MODE = {
    EVENT_TIME_ORDERING: "org.apache.hudi.common.model.DefaultHoodieRecordPayload",
    COMMIT_TIME_ORDERING: "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload",
}
MODE_FOR_PAYLOAD = {v: k for k, v in PAYLOAD_FOR_MODE.items()}


def _positive_int(value: str) -> int:
    n = int(value)
    if n <= 0:
        raise ValueError("must be a positive integer")
    return n


def _choice(*allowed: str) -> Callable[[str], str]:
    def check(value: str) -> str:
        if value not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return value
    return check


def _boolean(value: str) -> bool:
    if value.lower() not in ("true", "false"):
        raise ValueError("must be true or false")
    return value.lower() == "true"


_DURATION = re.compile(r"^(\d+)\s*(ms|s|m|h|d)?$")
MAX_DURATION_MS = 253_402_300_799_999   # 1970 .. the end of year 9999, as eventtime.MAX_MS
_DURATION_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, None: 1000}


def parse_duration_ms(value: str) -> int:
    """`90s`, `15m`, `2h`, `1d`, `500ms`; a bare number is seconds (Hudi's `*.seconds` convention)."""
    m = _DURATION.match(value.strip())
    if not m:
        raise ValueError(f"malformed duration {value!r}: expected e.g. 30s, 15m, 2h, 1d")
    ms = int(m.group(1)) * _DURATION_MS[m.group(2)]
    if ms > MAX_DURATION_MS:
        raise ValueError(f"duration {value!r} is out of range: at most {MAX_DURATION_MS // 86_400_000}d "
                         "(the span from 1970 to year 9999)")
    return ms


HIVE_SYNC_TOOL = "org.apache.hudi.hive.HiveSyncTool"
GLUE_SYNC_TOOL = "org.apache.hudi.aws.sync.AwsGlueCatalogSyncTool"


def _metastore_uris(value: str) -> str:
    """Empty (not set), or comma-separated thrift://host:port (hive.metastore.uris' form)."""
    for uri in (u.strip() for u in value.split(",") if u.strip()):
        match = re.fullmatch(r"thrift://[^:/\s]+:(\d+)", uri)
        if not match:
            raise ValueError("must be thrift://host:port (comma-separated for several)")
        if not 1 <= int(match.group(1)) <= 65535:
            raise ValueError(f"{uri}: the port must be 1-65535")
    return value


def _sync_tools(value: str) -> list[str]:
    """Comma-separated sync tool classes (as Hudi takes them): HiveSyncTool and/or AwsGlueCatalogSyncTool."""
    tools = [t.strip() for t in value.split(",") if t.strip()]
    for tool in tools:
        if tool not in (HIVE_SYNC_TOOL, GLUE_SYNC_TOOL):
            raise ValueError(f"must be {HIVE_SYNC_TOOL} and/or {GLUE_SYNC_TOOL} (comma-separated)")
    return tools


def _catalog_name(value: str) -> str:
    if value and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
        raise ValueError("must be letters, digits and underscores")
    return value


# The RO view's published guarantee (written by an event-time compaction; unknown keys to Java and hudi-rs).
RO_COMPLETION_KEY = "tidemark.ro.completion.time"
RO_FRESHNESS_KEY = "tidemark.ro.freshness.time"
RO_THRESHOLD_KEY = "tidemark.ro.threshold"
RO_INSTANT_KEY = "tidemark.ro.compaction.instant"

STORAGE_LOCK_PROVIDER = "org.apache.hudi.client.transaction.lock.StorageBasedLockProvider"
LOCK_PROVIDER_KEY = "hoodie.write.lock.provider"
LOCK_VALIDITY_KEY = "hoodie.write.lock.storage.validity.timeout.secs"
LOCK_RENEW_KEY = "hoodie.write.lock.storage.renew.interval.secs"

# Settings every writer of the table must share: stored with the table, never one operation's override.
TABLE_ONLY_SETTINGS = frozenset({LOCK_PROVIDER_KEY, LOCK_VALIDITY_KEY, LOCK_RENEW_KEY})

# Write / table-service settings a user may pass with --config, with their validators and defaults.
WRITE_SETTINGS: dict[str, tuple[Callable[[str], object], str]] = {
    "hoodie.logfile.max.size": (_positive_int, str(1024 * 1024 * 1024)),
    "hoodie.logfile.data.block.format": (_choice(*BlockFormat), BlockFormat.AVRO),
    "hoodie.logfile.data.block.max.size": (_positive_int, str(256 * 1024 * 1024)),
    "hoodie.bucket.index.num.buckets": (_positive_int, "4"),
    "hoodie.parquet.compression.codec": (_choice("snappy", "zstd", "gzip", "none"), "snappy"),
    "hoodie.parquet.max.row.group.rows": (_positive_int, "1000000"),
    "hoodie.compaction.strategy": (_choice(*StrategyName), StrategyName.EVENT_TIME),
    "hoodie.compaction.event.time.data.latency": (parse_duration_ms, "0s"),
    # Set: a schedule with no threshold of its own follows the table's stream, up to its watermark minus this.
    "hoodie.compaction.event.time.stream.lateness": (parse_duration_ms, "0s"),
    "hoodie.compaction.logfile.size.threshold": (int, "0"),
    "hoodie.compaction.target.io": (_positive_int, "512000"),
    "hoodie.compaction.carry.over.mode": (_choice(*CarryOver), CarryOver.SYMLINK),
    "hoodie.compaction.exact.event.time": (_boolean, "false"),
    "hoodie.cleaner.commits.retained": (_positive_int, "10"),
    # Cleaning and archival (Hudi's HoodieCleanConfig / HoodieArchivalConfig keys and defaults).
    "hoodie.clean.automatic": (_boolean, "true"),
    "hoodie.clean.async": (_boolean, "false"),
    "hoodie.clean.max.commits": (_positive_int, "1"),
    "hoodie.cleaner.policy": (_choice(*CleanerPolicy), CleanerPolicy.KEEP_LATEST_COMMITS),
    "hoodie.cleaner.fileversions.retained": (_positive_int, "3"),
    "hoodie.cleaner.hours.retained": (_positive_int, "24"),
    "hoodie.archive.automatic": (_boolean, "true"),
    "hoodie.keep.min.commits": (_positive_int, "20"),
    "hoodie.keep.max.commits": (_positive_int, "30"),
    "hoodie.commits.archival.batch": (_positive_int, "10"),
    "hoodie.client.heartbeat.interval_in_ms": (_positive_int, "60000"),
    "hoodie.client.heartbeat.tolerable.misses": (_positive_int, "2"),
    # Hudi's storage-based lock (engine.io.store_lock): set, writers on every host serialise through the table's
    # store; unset, the host's file lock (and the control plane's lease) only.
    "hoodie.write.lock.provider": (_choice("", STORAGE_LOCK_PROVIDER), ""),
    "hoodie.write.lock.storage.validity.timeout.secs": (_positive_int, "300"),
    "hoodie.write.lock.storage.renew.interval.secs": (_positive_int, "30"),
    "hoodie.datasource.write.hive_style_partitioning": (_boolean, "false"),
    # Catalog sync (engine/catalog): Hudi's own keys, as HiveSyncTool and AwsGlueCatalogSyncTool read them.
    "hoodie.datasource.hive_sync.enable": (_boolean, "false"),
    "hoodie.datasource.hive_sync.metastore.uris": (_metastore_uris, ""),
    "hoodie.datasource.hive_sync.database": (_catalog_name, "default"),
    "hoodie.datasource.hive_sync.table": (_catalog_name, ""),
    "hoodie.datasource.hive_sync.support_timestamp": (_boolean, "true"),
    "hoodie.meta.sync.client.tool.class": (_sync_tools, HIVE_SYNC_TOOL),
    "hoodie.aws.glue.region": (str, ""),
    "hoodie.aws.glue.endpoint": (str, ""),
}


def validate_settings(settings: Mapping[str, str], per_operation: bool = False) -> dict[str, str]:
    """Check user-supplied KEY=VALUE settings; unknown keys and malformed values raise ConfigError, and so do, for
    one operation's overrides (`per_operation`), the settings only a table can have."""
    out: dict[str, str] = {}
    for key, value in settings.items():
        if key not in WRITE_SETTINGS:
            known = ", ".join(sorted(WRITE_SETTINGS))
            raise ConfigError(f"unknown config key {key!r}; supported keys: {known}")
        if per_operation and key in TABLE_ONLY_SETTINGS:
            raise ConfigError(f"{key} is a table setting: every writer of the table must take the same lock, so it "
                              "cannot be set for one operation; store it with `create --config` or "
                              "Table.update_settings")
        check, _ = WRITE_SETTINGS[key]
        try:
            check(value)
        except ValueError as exc:
            raise ConfigError(f"malformed value {value!r} for {key}: {exc}") from None
        out[key] = value
    return out


def parse_config_args(pairs: list[str] | None) -> dict[str, str]:
    """`["k=v", ...]` from the CLI into a validated dict."""
    raw: dict[str, str] = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise ConfigError(f"malformed --config {pair!r}: expected KEY=VALUE")
        key, value = pair.split("=", 1)
        raw[key.strip()] = value.strip()
    return validate_settings(raw)


# --- Java .properties text -------------------------------------------------------------------------

def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t", "r": "\r"}.get(m.group(1), m.group(1)), text)


def _escape(text: str, is_key: bool = False) -> str:
    out = text.replace("\\", "\\\\").replace(":", "\\:").replace("=", "\\=").replace("\n", "\\n")
    return out.replace(" ", "\\ ") if is_key else out


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java properties text (the subset Hudi writes: `key=value`, `\\:` escapes, `#` comments)."""
    props: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        i += 1
        while line.endswith("\\") and not line.endswith("\\\\") and i < len(lines):
            line = line[:-1] + lines[i].strip()
            i += 1
        if not line or line[0] in "#!":
            continue
        m = re.match(r"((?:\\.|[^=:\s])+)\s*[=:\s]\s*(.*)$", line)
        if m:
            props[_unescape(m.group(1))] = _unescape(m.group(2))
    return props


def format_properties(props: Mapping[str, str]) -> str:
    now = dt.datetime.now(dt.UTC)
    head = f"#Properties saved on {now.isoformat().replace('+00:00', 'Z')}\n#{now:%a %b %d %H:%M:%S UTC %Y}\n"
    return head + "".join(f"{_escape(k, True)}={_escape(v)}\n" for k, v in sorted(props.items()))


def table_checksum(database: str, table_name: str) -> str:
    """Java's HoodieTableConfig.generateChecksum: CRC32 of "<database>.<table>"."""
    return str(zlib.crc32(f"{database}.{table_name}".encode()))


# --- the table's configuration ---------------------------------------------------------------------

@dataclass
class TableConfig:
    """Everything a reader or writer needs to know about a table, from hoodie.properties."""

    base_path: str
    props: dict[str, str] = field(default_factory=dict)
    # hoodie.properties as it was read (None: a table being created). Saving applies only what changed since to
    # the file as it is then (`save_table_config`): another process's update in between is kept, not undone.
    loaded: dict[str, str] | None = field(default=None, repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.props["hoodie.table.name"]

    @property
    def version(self) -> int:
        return int(self.props.get("hoodie.table.version", "0"))

    @property
    def record_key_fields(self) -> list[str]:
        return _csv(self.props.get("hoodie.table.recordkey.fields", ""))

    @property
    def partition_fields(self) -> list[str]:
        return _csv(self.props.get("hoodie.table.partition.fields", ""))

    @property
    def ordering_field(self) -> str | None:
        # v9 states the ordering fields outright (hoodie.table.ordering.fields); v6 and v8 name a precombine field
        fields = _csv(self.props.get("hoodie.table.ordering.fields") or self.props.get("hoodie.table.precombine.field", ""))
        return fields[0] if fields else None

    @property
    def event_time_field(self) -> str | None:
        return self.props.get("hoodie.payload.event.time.field") or None

    @property
    def merge_mode(self) -> str:
        explicit = self.props.get("hoodie.record.merge.mode")
        if explicit:
            return explicit
        payload = self.props.get("hoodie.compaction.payload.class", "")
        if not payload and self.version >= 9 and self.ordering_field:
            return EVENT_TIME_ORDERING   # Hudi 1.1 infers event-time ordering from stated ordering fields
        return KNOWN_PAYLOADS.get(payload, COMMIT_TIME_ORDERING)

    @property
    def hive_style(self) -> bool:
        return self.props.get("hoodie.datasource.write.hive_style_partitioning", "false").lower() == "true"

    @property
    def num_buckets(self) -> int:
        # Fixed when the table is created: changing it would route existing keys to other file groups.
        return int(self.props.get("hoodie.bucket.index.num.buckets", WRITE_SETTINGS["hoodie.bucket.index.num.buckets"][1]))

    @property
    def uses_bucket_index(self) -> bool:
        return self.props.get(INDEX_TYPE_KEY) == BUCKET_INDEX

    def setting(self, key: str, overrides: Mapping[str, str] | None = None) -> Any:
        """A write setting: per-call override, else the table's stored value, else the default, parsed."""
        check, default = WRITE_SETTINGS[key]
        raw = (overrides or {}).get(key) or self.props.get(key) or default
        return check(raw)

    def int_setting(self, key: str, overrides: Mapping[str, str] | None = None) -> int:
        """`setting` of a key whose values are integers (sizes, counts, millis)."""
        value = self.setting(key, overrides)
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{key} is not an integer setting")
        return value

    def str_setting(self, key: str, overrides: Mapping[str, str] | None = None) -> str:
        """`setting` of a key whose values are strings (choices, names)."""
        value = self.setting(key, overrides)
        if not isinstance(value, str):
            raise TypeError(f"{key} is not a string setting")
        return value

    def hoodie_dir(self) -> str:
        return storage.join(self.base_path, HOODIE_DIR)


def _csv(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


# table version -> its timeline layout version
SUPPORTED_TABLE_VERSIONS: dict[int, str] = {6: "1", 8: "2", 9: "2"}


def load_table_config(base_path: str) -> TableConfig:
    """Read and check hoodie.properties: MOR tables of version 6 (timeline layout 1), 8 or 9 (layout 2) whose
    records merge in a way Tidemark reproduces."""
    path = storage.join(base_path, HOODIE_DIR, PROPERTIES_FILE)
    text = _read_properties(path)
    if text is None:
        raise TableNotFoundError(f"no Hudi table at {base_path}: {path} does not exist")
    props = parse_properties(text)
    cfg = TableConfig(base_path=base_path, props=props, loaded=dict(props))
    if cfg.version not in SUPPORTED_TABLE_VERSIONS:
        raise UnsupportedTableError(
            f"{base_path}: hoodie.table.version={cfg.version} is not supported (Tidemark supports table versions 6 "
            "(timeline layout 1), 8 and 9 (timeline layout 2))")
    layout = props.get("hoodie.timeline.layout.version")
    if layout is not None and layout != SUPPORTED_TABLE_VERSIONS[cfg.version]:
        raise UnsupportedTableError(f"{base_path}: hoodie.table.version={cfg.version} with "
                                    f"hoodie.timeline.layout.version={layout} (expected "
                                    f"{SUPPORTED_TABLE_VERSIONS[cfg.version]})")
    check_merge_behaviour(cfg)
    if props.get("hoodie.table.type") != "MERGE_ON_READ":
        raise UnsupportedTableError(f"{base_path}: hoodie.table.type={props.get('hoodie.table.type')} is not MERGE_ON_READ")
    if not cfg.record_key_fields:
        raise UnsupportedTableError(f"{base_path}: hoodie.table.recordkey.fields is missing")
    return cfg


# Payload classes whose merge Tidemark reproduces (the built-in ones behind the two merge modes), and the one key
# Hudi 1.1 adds to say the table is not Hudi's own format.
KNOWN_PAYLOADS = {**MODE_FOR_PAYLOAD, "org.apache.hudi.common.model.EventTimeAvroPayload": EVENT_TIME_ORDERING}
NATIVE_TABLE_FORMAT = "native"


def check_merge_behaviour(cfg: TableConfig) -> None:
    """Refuse, naming the setting, a table whose records merge in a way Tidemark cannot reproduce: a merge mode
    other than EVENT_TIME_ORDERING / COMMIT_TIME_ORDERING (CUSTOM runs a Java merger class), a payload class of
    its own where the payload decides (no merge mode stated, or CUSTOM), or a table format other than Hudi's
    native one. Reading such a table with our merge would return other rows than Java Hudi; writing or
    compacting it would store them."""
    where, props = cfg.base_path, cfg.props
    mode = props.get("hoodie.record.merge.mode")
    if mode and mode not in (EVENT_TIME_ORDERING, COMMIT_TIME_ORDERING):
        raise UnsupportedTableError(f"{where}: hoodie.record.merge.mode={mode} is not supported: Tidemark merges by "
                                    f"{EVENT_TIME_ORDERING} or {COMMIT_TIME_ORDERING} only (a CUSTOM merger is Java code)")
    payload = props.get("hoodie.compaction.payload.class")
    if payload and not mode and payload not in KNOWN_PAYLOADS:
        raise UnsupportedTableError(f"{where}: hoodie.compaction.payload.class={payload} is not supported: Tidemark "
                                    f"merges as {', '.join(sorted(KNOWN_PAYLOADS))} do")
    ordering = _csv(props.get("hoodie.table.ordering.fields", ""))
    if len(ordering) > 1:
        # Hudi breaks ties on the later fields; Tidemark orders by one field, so ties would fall to log order.
        raise UnsupportedTableError(f"{where}: hoodie.table.ordering.fields={','.join(ordering)} is not supported: "
                                    "Tidemark orders records by a single ordering field")
    partial_mode = props.get("hoodie.table.partial.update.mode", "NONE")
    if partial_mode.upper() != "NONE":
        # v9's stand-in for PartialUpdateAvroPayload & co.: merge rules (defaults ignored, markers) we do not apply.
        raise UnsupportedTableError(f"{where}: hoodie.table.partial.update.mode={partial_mode} is not supported: "
                                    "Tidemark merges partial-update blocks, not payload-style partial updates")
    legacy = props.get("hoodie.table.legacy.payload.class")
    if legacy and legacy not in KNOWN_PAYLOADS:
        raise UnsupportedTableError(f"{where}: hoodie.table.legacy.payload.class={legacy} is not supported: Tidemark "
                                    f"merges as {', '.join(sorted(KNOWN_PAYLOADS))} do")
    fmt = props.get("hoodie.table.format", NATIVE_TABLE_FORMAT)
    if fmt != NATIVE_TABLE_FORMAT:
        raise UnsupportedTableError(f"{where}: hoodie.table.format={fmt} is not supported: Tidemark reads and writes "
                                    f"Hudi's own format ({NATIVE_TABLE_FORMAT}) only")


def refuse_logs_without_meta_fields(cfg: TableConfig, has_logs: bool, what: str) -> None:
    """A table written without meta fields (`hoodie.populate.meta.fields=false`) keeps no `_hoodie_record_key` in
    its records; Tidemark merges logs into base rows by that key, so merging its logs would pair every record
    with every other. Its base files alone (a read-optimized read, a slice without logs) read as they are."""
    if has_logs and cfg.props.get("hoodie.populate.meta.fields", "true").lower() == "false":
        raise UnsupportedTableError(f"{cfg.base_path}: hoodie.populate.meta.fields=false with log files: {what} "
                                    "would merge records without their record keys; read it read-optimized")


def _read_properties(path: str) -> str | None:
    """hoodie.properties' text; on an object store, its backup while an update is between delete and put
    (Hudi's HoodieTableConfig reads the backup the same way). None when there is neither."""
    # Once per table operation (storage.operation_reads): Table, the pipeline, the rollback of expired writes
    # and the catalog sync each load the config, which made 3-4 GETs of it per operation on an object store.
    data = storage.read_shared(path)
    if data is None and storage.is_remote(path):
        data = storage.read_shared(path + BACKUP_SUFFIX)
    return None if data is None else data.decode("utf-8")


def _merged(cfg: TableConfig, current: str | None) -> dict[str, str]:
    """`cfg.props` as the change it makes to what was loaded, applied to the file's `current` text: keys set or
    changed since the load take cfg's value, keys removed since are removed, every other key is the file's now."""
    if current is None or cfg.loaded is None:
        return dict(cfg.props)
    out = parse_properties(current)
    for key, value in cfg.props.items():
        if cfg.loaded.get(key) != value:
            out[key] = value
    for key in cfg.loaded.keys() - cfg.props.keys():
        out.pop(key, None)
    return out


def save_table_config(cfg: TableConfig) -> None:
    """Atomically rewrite hoodie.properties, keeping unknown Java keys.

    Local: temp file + fsync + rename. An object store's PUT replaces the object whole, so readers see the old
    file or the new one: one request (with `If-Match`, the operation's read of the file and no GET:
    `_replaced_if_unchanged`). Stores without either (HDFS through pyarrow): Hudi's backup-file protocol
    (HoodieTableConfig.modify) — copy the current file to `hoodie.properties.backup`, write the new file, delete
    the backup; readers fall back to the backup meanwhile."""
    path = storage.join(cfg.hoodie_dir(), PROPERTIES_FILE)
    backup = path + BACKUP_SUFFIX
    remote = storage.is_remote(path)
    if remote and _replaced_if_unchanged(cfg, path):
        return
    # Read again now, not the operation's copy (which may be minutes old): another process's update since the
    # load — a setting, a Java writer's key — is kept, and only this update's own changes are applied. (A caller
    # holding the table lock may have asked for this read a moment ago, in flight with its own publish.)
    main = storage.read_current(path)
    current = main if main is not None or not remote else storage.read_optional(backup)
    cfg.props = _merged(cfg, None if current is None else current.decode("utf-8"))
    cfg.loaded = dict(cfg.props)
    if remote and storage.replaces_whole(path):
        storage.write_bytes(path, format_properties(cfg.props).encode("utf-8"))
        if main is None and current is not None:   # a crashed update left only its backup: done with it, as
            storage.remove_if_exists(backup)        # Java's recoverIfNeeded is once the file is back
        return
    if remote:
        had = main is not None   # not its backup alone (a crashed Java update on HDFS can leave only that)
        if had:
            storage.copy(path, backup)
        storage.write_bytes(path, format_properties(cfg.props).encode("utf-8"))
        if had:
            storage.remove_if_exists(backup)
        return
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(format_properties(cfg.props))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def update_reads_first(base_path: str) -> bool:
    """Whether `save_table_config` starts with a GET of hoodie.properties (a caller may ask for it ahead): not when
    the store replaces the file only while unchanged (`If-Match`) and the operation read it already."""
    path = storage.join(base_path, HOODIE_DIR, PROPERTIES_FILE)
    return not (storage.is_remote(path) and storage.replaces_whole(path) and storage.conditional_replace(path)
                and storage.shared_read_tagged(path) is not None)


def _replaced_if_unchanged(cfg: TableConfig, path: str, attempts: int = 3) -> bool:
    """On a store whose PUT replaces an object whole and takes `If-Match`: the update applied to the operation's own
    read of the file (no GET), put only while the object is still the one read; when another process replaced it
    since, read again and apply it to that. False when this cannot be done (the operation holds no read of the
    file with its ETag, which it reads now: a missing file, only its backup left, or replaced too often):
    `save_table_config`'s read-then-put does it."""
    if not (storage.replaces_whole(path) and storage.conditional_replace(path)):
        return False
    known = storage.shared_read_tagged(path)
    for _ in range(attempts):
        if known is None:
            known = storage.read_tagged(path)
            if known is None:
                return False
        props = _merged(cfg, known[0].decode("utf-8"))
        try:
            storage.replace_if_match(path, format_properties(props).encode("utf-8"), known[1])
        except storage.PublishConflict:
            known = None   # replaced since it was read: read it again
            continue
        cfg.props, cfg.loaded = props, dict(props)
        return True
    return False


def keygen_class(record_keys: list[str], partition_fields: list[str]) -> str:
    if not partition_fields:
        return "org.apache.hudi.keygen.NonpartitionedKeyGenerator"
    if len(record_keys) > 1 or len(partition_fields) > 1:
        return "org.apache.hudi.keygen.ComplexKeyGenerator"
    return "org.apache.hudi.keygen.SimpleKeyGenerator"


# Hudi 1.x's record merge strategies (HoodieRecordMerger.EVENT_TIME_BASED_MERGE_STRATEGY_UUID /
# COMMIT_TIME_BASED_MERGE_STRATEGY_UUID; the v8 fixture records the event-time one).
MERGE_STRATEGY_FOR_MODE = {EVENT_TIME_ORDERING: "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5",
                           COMMIT_TIME_ORDERING: "ce9acb64-bde0-424c-9b91-f6ebba25356d"}
_KEYGEN_TYPE = {"org.apache.hudi.keygen.NonpartitionedKeyGenerator": "NON_PARTITION",
                "org.apache.hudi.keygen.ComplexKeyGenerator": "COMPLEX",
                "org.apache.hudi.keygen.SimpleKeyGenerator": "SIMPLE"}


CREATABLE_TABLE_VERSIONS = (6, 8, 9)
DEFAULT_TABLE_VERSION = 6

# Keys a version-9 table no longer carries: Hudi 1.1 states the ordering fields, the merge mode and the key
# generator type outright instead (hoodie.table.ordering.fields, hoodie.record.merge.mode,
# hoodie.table.keygenerator.type), and has no payload class or merge strategy id for the built-in modes.
_V9_DROPPED = ("hoodie.table.precombine.field", "hoodie.compaction.payload.class", "hoodie.table.keygenerator.class")


def apply_table_version(props: dict[str, str], table_version: int) -> None:
    """Turn a new table's version-6 properties into those of `table_version`, as Hudi writes that version:
    Hudi 1.0 for 8, Hudi 1.1 for 9 (tests/engine/config/test_properties.py holds them against the Java fixtures)."""
    if table_version not in CREATABLE_TABLE_VERSIONS:
        raise ConfigError(f"table version {table_version} cannot be created; use "
                          f"{', '.join(map(str, CREATABLE_TABLE_VERSIONS))} (default {DEFAULT_TABLE_VERSION})")
    if table_version == 6:
        return
    keygen = props["hoodie.table.keygenerator.class"]
    props.update({"hoodie.table.version": str(table_version), "hoodie.timeline.layout.version": "2",
                  "hoodie.table.initial.version": str(table_version), "hoodie.timeline.path": "timeline",
                  "hoodie.timeline.history.path": "history", "hoodie.table.keygenerator.type": _KEYGEN_TYPE[keygen]})
    if table_version == 8:
        props["hoodie.record.merge.strategy.id"] = MERGE_STRATEGY_FOR_MODE[props["hoodie.record.merge.mode"]]
        return
    props["hoodie.table.ordering.fields"] = props["hoodie.table.precombine.field"]
    props["hoodie.table.format"] = "native"
    for key in _V9_DROPPED:
        props.pop(key, None)


def new_table_props(*, name: str, record_keys: list[str], partition_fields: list[str], ordering_field: str,
                    event_time_field: str, merge_mode: str, hive_style: bool,
                    settings: Mapping[str, str] | None = None, database: str = "default",
                    table_version: int = DEFAULT_TABLE_VERSION) -> dict[str, str]:
    """hoodie.properties content for a new MOR table (version 6, 8 or 9) with a bucket index."""
    if merge_mode not in PAYLOAD_FOR_MODE:
        raise ConfigError(f"unknown merge mode {merge_mode!r}; use event_time or commit_time")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ConfigError(f"table name {name!r} must be letters, digits and underscores")
    props = {
        "hoodie.table.name": name,
        "hoodie.table.type": "MERGE_ON_READ",
        "hoodie.table.version": "6",
        "hoodie.timeline.layout.version": "1",
        "hoodie.table.recordkey.fields": ",".join(record_keys),
        "hoodie.table.precombine.field": ordering_field,
        "hoodie.payload.event.time.field": event_time_field,
        "hoodie.record.merge.mode": merge_mode,
        "hoodie.compaction.payload.class": PAYLOAD_FOR_MODE[merge_mode],
        "hoodie.datasource.write.hive_style_partitioning": str(hive_style).lower(),
        "hoodie.datasource.write.partitionpath.urlencode": "false",
        "hoodie.datasource.write.drop.partition.columns": "false",
        "hoodie.table.keygenerator.class": keygen_class(record_keys, partition_fields),
        "hoodie.archivelog.folder": "archived",
        "hoodie.database.name": database,
        "hoodie.table.checksum": table_checksum(database, name),
        # Our bucket index hashes keys with Spark's murmur3 `hash`, not Java's String.hashCode, so it is
        # recorded under Tidemark's own key: a Java writer must not mistake it for its BUCKET index.
        INDEX_TYPE_KEY: BUCKET_INDEX,
        "hoodie.bucket.index.num.buckets": str((settings or {}).get("hoodie.bucket.index.num.buckets", "4")),
        "hoodie.populate.meta.fields": "true",
        "hoodie.table.base.file.format": "PARQUET",
        "hoodie.table.log.file.format": "HOODIE_LOG",
    }
    if partition_fields:
        props["hoodie.table.partition.fields"] = ",".join(partition_fields)
    apply_table_version(props, table_version)
    props.update(validate_settings(dict(settings or {})))
    return props
