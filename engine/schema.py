"""Table schemas: the Avro record schema in commit metadata, its meta-field form, and its Arrow form."""
from __future__ import annotations

import functools
import json

import pyarrow as pa

from engine.avro_codec import arrow_to_avro_schema, avro_to_arrow_schema
from engine.errors import TidemarkError
from engine.properties import TableConfig
from engine.timeline import Timeline

META_FIELDS = ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
               "_hoodie_partition_path", "_hoodie_file_name"]


def table_avro_schema(table_name: str, arrow_schema: pa.Schema) -> dict:
    """Avro record schema (no meta fields) named the way Java Hudi names it."""
    data = pa.schema([f for f in arrow_schema if f.name not in META_FIELDS and not f.name.startswith("__tm_")])
    return arrow_to_avro_schema(data, f"{table_name}_record", f"hoodie.{table_name}")


def schema_with_meta(schema: dict) -> dict:
    """The schema log blocks carry: the 5 `_hoodie_*` string fields first, then the data fields."""
    meta = [{"name": n, "type": ["null", "string"], "doc": "", "default": None} for n in META_FIELDS]
    data = [f for f in schema["fields"] if f["name"] not in META_FIELDS]
    return {**schema, "fields": meta + data}


def evolve_schema(current: dict | None, incoming: dict) -> dict:
    """Add new columns at the end; existing columns keep their type (incoming values are cast)."""
    if current is None:
        return incoming
    names = {f["name"] for f in current["fields"]}
    added = [f for f in incoming["fields"] if f["name"] not in names]
    return {**current, "fields": list(current["fields"]) + added}


@functools.lru_cache(maxsize=64)
def _arrow_of(schema_json: str) -> pa.Schema:
    return avro_to_arrow_schema(json.loads(schema_json))


def arrow_schema(avro_schema: dict) -> pa.Schema:
    return _arrow_of(json.dumps(avro_schema, sort_keys=True))


def table_read_schema(cfg: TableConfig, timeline: Timeline) -> pa.Schema:
    """Arrow schema of the table's rows, meta fields first (latest commit's schema, else create schema)."""
    text = timeline.latest_schema() or cfg.props.get("hoodie.table.create.schema")
    if not text:
        raise TidemarkError(f"table {cfg.name} has no schema yet (no completed commit)")
    return arrow_schema(schema_with_meta(json.loads(text)))
