"""What `<name>_ro` and `<name>_rt` look like in a catalog: Hudi's HiveSyncTool shape, from the table alone.

HiveSyncTool (hudi-hive-sync, HMS mode) registers a Merge-On-Read table as two EXTERNAL tables over the
same base path: `_ro` with `org.apache.hudi.hadoop.HoodieParquetInputFormat` (base files only) and `_rt`
with `...realtime.HoodieParquetRealtimeInputFormat` (base + logs merged), both with Hive's Parquet output
format and serde, the table's columns (Hudi's meta columns first) less the partition fields, which become
partition keys; serde properties `path` and `hoodie.query.as.ro.table`, and the `spark.sql.sources.*`
properties that make Spark read them through Hudi's data source. `last_commit_time_sync` names the last
completed commit the catalog reflects (and, table version 8, `last_commit_completion_time_sync` its completion
time, as Hudi 1.x writes it). Tidemark adds its RO guarantee to `_ro` only (`tidemark.ro.completion.time`,
ISO-8601 UTC, `tidemark.ro.completion.instant` and `tidemark.ro.guarantee`, `holds` or `broken` by late data):
that is the table whose rows the guarantee is about.

Everything here is pure: the HMS and Glue clients (`hms`, `glue`) turn these values into their own types.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from engine.config.properties import TableConfig
from engine.config.schema import schema_with_meta
from engine.timeline.actions import Action
from engine.timeline.instants import Timeline

RO_SUFFIX, RT_SUFFIX = "_ro", "_rt"
RO_INPUT_FORMAT = "org.apache.hudi.hadoop.HoodieParquetInputFormat"
RT_INPUT_FORMAT = "org.apache.hudi.hadoop.realtime.HoodieParquetRealtimeInputFormat"
OUTPUT_FORMAT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"
SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
EXTERNAL_TABLE = "EXTERNAL_TABLE"

LAST_COMMIT_TIME_SYNC = "last_commit_time_sync"   # Hudi's HOODIE_LAST_COMMIT_TIME_SYNC
LAST_COMMIT_COMPLETION_TIME_SYNC = "last_commit_completion_time_sync"   # Hudi 1.x's, for table version 8
RO_COMPLETION_TIME = "tidemark.ro.completion.time"
RO_COMPLETION_INSTANT = "tidemark.ro.completion.instant"
RO_GUARANTEE = "tidemark.ro.guarantee"
HOLDS, BROKEN = "holds", "broken"
# AWSGlueCatalogSyncClient's: whether engines may list partitions from the metadata table (Tidemark keeps none)
GLUE_METADATA_LISTING = "hudi.metadata-listing-enabled"
# Properties this module owns on a catalog table: a sync sets or removes each, and leaves every other alone.
OWNED_PREFIXES = ("spark.sql.sources.", "spark.sql.create.version", "tidemark.ro.")
SCHEMA_PART_LENGTH = 4000   # hoodie.datasource.hive_sync.schema_string_length_thresh default
DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"

_COMMIT_ACTIONS = frozenset({Action.COMMIT, Action.DELTACOMMIT, Action.REPLACECOMMIT})   # Hudi's commits timeline (MOR)


@dataclass(frozen=True)
class RoGuarantee:
    """What `_ro` promises: all data with event time ≤ `completion_time` (ISO-8601 UTC) is in base files, since
    compaction `instant`; `state` is HOLDS, or BROKEN when late data lowered the time below what it published."""

    completion_time: str
    instant: str
    state: str


@dataclass(frozen=True)
class Column:
    name: str
    type: str   # Hive type name, lower case (`bigint`, `struct<a:int>`), as HiveSchemaUtil writes it


@dataclass(frozen=True)
class Partition:
    path: str            # relative partition path as on storage ("year=2013/month=1" or "2013/1")
    values: list[str]    # MultiPartKeysValueExtractor: each segment, after its `=` when hive-style
    location: str


@dataclass
class CatalogTable:
    """One catalog table (`<name>_ro` or `<name>_rt`) as HiveSyncTool creates it."""

    database: str
    name: str
    location: str
    columns: list[Column]
    partition_keys: list[Column]
    input_format: str
    output_format: str = OUTPUT_FORMAT
    serde: str = SERDE
    serde_parameters: dict[str, str] = field(default_factory=dict)
    parameters: dict[str, str] = field(default_factory=dict)
    table_type: str = EXTERNAL_TABLE

    @property
    def read_optimized(self) -> bool:
        return self.input_format == RO_INPUT_FORMAT


@dataclass
class CatalogShape:
    """Both tables and the partitions they share."""

    ro: CatalogTable
    rt: CatalogTable
    partitions: list[Partition]
    schema_digest: str = ""   # of the schema the shape was made from (sync: what a later write compares with)

    @property
    def tables(self) -> list[CatalogTable]:
        return [self.ro, self.rt]


@dataclass(frozen=True)
class SyncNames:
    database: str
    table: str      # the base name: `<table>_ro` and `<table>_rt` are registered

    @property
    def ro(self) -> str:
        return self.table + RO_SUFFIX

    @property
    def rt(self) -> str:
        return self.table + RT_SUFFIX


def table_location(base_path: str) -> str:
    """The table's URI as catalogs store it: a URI as given, a local path as `file:/abs/path` (HMS's form)."""
    if "://" in base_path:
        return base_path.rstrip("/")
    return "file:" + os.path.abspath(base_path)


def partition_location(location: str, partition_path: str) -> str:
    return location if not partition_path else f"{location}/{partition_path}"


def partition_values(partition_path: str) -> list[str]:
    """Hudi's MultiPartKeysValueExtractor: one value per path segment, the part after `=` if there is one."""
    return [seg.split("=", 1)[1] if "=" in seg else seg for seg in partition_path.split("/")]


def catalog_shape(cfg: TableConfig, timeline: Timeline, partitions: list[str], names: SyncNames, *,
                  avro_schema: dict[str, Any], ro_guarantee: RoGuarantee | None,
                  support_timestamp: bool = True, spark_version: str | None = None, glue: bool = False) -> CatalogShape:
    """The `_ro`/`_rt` pair for `cfg`'s table with schema `avro_schema` (no meta fields) and its partitions.

    `ro_guarantee` is None when no event-time compaction stands (then `_ro` carries none of its properties).
    `glue`: the tables as AWSGlueCatalogSyncClient makes them (one parameter more)."""
    location = table_location(cfg.base_path)
    fields = schema_with_meta(avro_schema)["fields"]
    hive = [Column(f["name"], hive_type(f["type"], support_timestamp)) for f in fields]
    part_names = cfg.partition_fields
    by_name = {c.name: c.type for c in hive}
    # HiveSchemaUtil.getPartitionKeyType: the column's type when the data has it, else string
    partition_keys = [Column(p, by_name.get(p, "string")) for p in part_names]
    columns = [c for c in hive if c.name not in part_names]
    params = _table_parameters(fields, part_names, support_timestamp, spark_version)
    last = timeline.last_completed(_COMMIT_ACTIONS)
    if last is not None:
        params[LAST_COMMIT_TIME_SYNC] = last.timestamp
        if last.completion_time is not None:
            params[LAST_COMMIT_COMPLETION_TIME_SYNC] = last.completion_time
    if glue:
        params[GLUE_METADATA_LISTING] = "false"
    ro_params = dict(params)
    if ro_guarantee is not None:
        ro_params[RO_COMPLETION_TIME] = ro_guarantee.completion_time
        ro_params[RO_COMPLETION_INSTANT] = ro_guarantee.instant
        ro_params[RO_GUARANTEE] = ro_guarantee.state

    def table(name: str, input_format: str, read_optimized: bool, parameters: dict[str, str]) -> CatalogTable:
        serde = {"path": location, "hoodie.query.as.ro.table": str(read_optimized).lower(),
                 "serialization.format": "1"}
        return CatalogTable(database=names.database, name=name, location=location, columns=columns,
                            partition_keys=partition_keys, input_format=input_format, serde_parameters=serde,
                            parameters={"EXTERNAL": "TRUE", **parameters})

    parts = [Partition(p, partition_values(p), partition_location(location, p)) for p in partitions if p]
    return CatalogShape(ro=table(names.ro, RO_INPUT_FORMAT, True, ro_params),
                        rt=table(names.rt, RT_INPUT_FORMAT, False, params), partitions=parts)


# ------------------------------------------------------------------------------------------ Spark's properties

def _table_parameters(fields: list[dict[str, Any]], partition_fields: list[str], support_timestamp: bool,
                      spark_version: str | None) -> dict[str, str]:
    """SparkDataSourceTableUtils.getSparkTableProperties: provider, schema JSON in parts, partition columns."""
    params = {"spark.sql.sources.provider": "hudi"}
    if spark_version:
        params["spark.sql.create.version"] = spark_version
    # Spark's catalog wants the partition columns last (Hudi reorders them the same way).
    ordered = [f for f in fields if f["name"] not in partition_fields] + \
              [f for p in partition_fields for f in fields if f["name"] == p]
    text = json.dumps({"type": "struct", "fields": [_spark_field(f, support_timestamp) for f in ordered]},
                      separators=(",", ":"))
    parts = [text[i:i + SCHEMA_PART_LENGTH] for i in range(0, len(text), SCHEMA_PART_LENGTH)] or [""]
    params["spark.sql.sources.schema.numParts"] = str(len(parts))
    for i, part in enumerate(parts):
        params[f"spark.sql.sources.schema.part.{i}"] = part
    if partition_fields:
        params["spark.sql.sources.schema.numPartCols"] = str(len(partition_fields))
        for i, name in enumerate(partition_fields):
            params[f"spark.sql.sources.schema.partCol.{i}"] = name
    return params


def _spark_field(f: dict[str, Any], support_timestamp: bool) -> dict[str, Any]:
    inner, nullable = _unwrap(f["type"])
    return {"name": f["name"], "type": spark_type(inner, support_timestamp), "nullable": nullable, "metadata": {}}


def spark_type(t: Any, support_timestamp: bool) -> Any:
    """Avro type -> Spark's JSON type (what `StructType.json()` writes)."""
    inner, _ = _unwrap(t)
    if isinstance(inner, dict):
        kind, logical = inner.get("type"), inner.get("logicalType")
        if logical == "decimal":
            return f"decimal({inner['precision']},{inner.get('scale', 0)})"
        if logical == "date":
            return "date"
        # Hudi derives Spark's schema from the Parquet types (Parquet2SparkSchemaUtils): a timestamp stays one
        # whatever support_timestamp says of the Hive column
        if logical in ("timestamp-millis", "timestamp-micros"):
            return "timestamp"
        if logical in ("local-timestamp-millis", "local-timestamp-micros"):
            return "timestamp_ntz"
        if kind == "record":
            return {"type": "struct", "fields": [_spark_field(x, support_timestamp) for x in inner["fields"]]}
        if kind == "array":
            el, el_null = _unwrap(inner["items"])
            return {"type": "array", "elementType": spark_type(el, support_timestamp), "containsNull": el_null}
        if kind == "map":
            v, v_null = _unwrap(inner["values"])
            return {"type": "map", "keyType": "string", "valueType": spark_type(v, support_timestamp),
                    "valueContainsNull": v_null}
        if kind == "enum":
            return "string"
        if kind == "fixed":
            return "binary"
        return spark_type(kind, support_timestamp)
    return {"string": "string", "int": "integer", "long": "long", "float": "float", "double": "double",
            "boolean": "boolean", "bytes": "binary", "null": "null"}[inner]


# ------------------------------------------------------------------------------------------ Hive's types

def hive_type(t: Any, support_timestamp: bool) -> str:
    """Avro type -> the Hive type HiveSchemaUtil derives from the same column's Parquet type, lower case."""
    inner, _ = _unwrap(t)
    if isinstance(inner, dict):
        kind, logical = inner.get("type"), inner.get("logicalType")
        if logical == "decimal":
            return f"decimal({inner['precision']},{inner.get('scale', 0)})"
        if logical == "date":
            return "date"
        if logical in ("timestamp-millis", "timestamp-micros", "local-timestamp-millis", "local-timestamp-micros"):
            return "timestamp" if support_timestamp else "bigint"
        if kind == "record":
            # HiveSchemaUtil lower-cases the whole type string: a struct's field names too
            return "struct<" + ",".join(f"{x['name'].lower()}:{hive_type(x['type'], support_timestamp)}"
                                        for x in inner["fields"]) + ">"
        if kind == "array":
            return f"array<{hive_type(inner['items'], support_timestamp)}>"
        if kind == "map":
            return f"map<string,{hive_type(inner['values'], support_timestamp)}>"
        if kind == "enum":
            return "string"
        if kind == "fixed":
            return "binary"
        return hive_type(kind, support_timestamp)
    return {"string": "string", "int": "int", "long": "bigint", "float": "float", "double": "double",
            "boolean": "boolean", "bytes": "binary"}[inner]


def _unwrap(t: Any) -> tuple[Any, bool]:
    """(the non-null branch of a nullable union, whether null is allowed)."""
    if isinstance(t, list):
        rest = [x for x in t if x != "null"]
        return (rest[0] if len(rest) == 1 else rest), len(rest) < len(t)
    return t, False


__all__ = ["CatalogShape", "CatalogTable", "Column", "Partition", "RoGuarantee", "SyncNames", "catalog_shape", "hive_type",
           "spark_type", "table_location", "partition_values"]
