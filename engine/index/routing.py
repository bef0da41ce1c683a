"""Record routing without Spark: record key, partition path and bucket computed with pyarrow.

Must agree exactly with the Spark columns of `engine.index.keys` (the DataFrame path), so it only handles key
and partition columns whose string form is the same in both (strings and integers); other inputs take
the DataFrame path.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.config.properties import TableConfig
from engine.index.bucket_hash import buckets_of, spark_hash_strings
from engine.index.keys import DEFAULT_PARTITION, EMPTY_KEY, NULL_KEY

# The routing columns `route` appends to input rows (record key, partition path, bucket): the writers group by
# them (engine.write.log_writer) and never store them.
KEY_COL, PART_COL, BUCKET_COL = "__tm_key", "__tm_part", "__tm_bucket"
# Also appended by `route` (not by Spark's routing columns): the key's murmur3 hash the bucket came from, which
# pre-combining reuses to find repeated keys (`job.keys_distinct`) instead of hashing every key again.
HASH_COL = "__tm_hash"


@dataclass(frozen=True)
class Routing:
    record_keys: tuple[str, ...]
    partition_fields: tuple[str, ...]
    hive_style: bool
    num_buckets: int

    @classmethod
    def of(cls, cfg: TableConfig) -> Routing:
        return cls(tuple(cfg.record_key_fields), tuple(cfg.partition_fields), cfg.hive_style, cfg.num_buckets)


def _stringable(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_integer(t))


def supports(routing: Routing, schema: pa.Schema) -> bool:
    """True when every key and partition column renders to the same string in pyarrow and Spark."""
    names = routing.record_keys + routing.partition_fields
    return all(n in schema.names and _stringable(schema.field(n).type) for n in names)


def _as_string(col: pa.ChunkedArray) -> pa.Array:
    return pc.cast(col.combine_chunks(), pa.string())


def record_keys(routing: Routing, table: pa.Table) -> pa.Array:
    if len(routing.record_keys) == 1:
        return _as_string(table.column(routing.record_keys[0]))
    parts = []
    for name in routing.record_keys:
        value = _as_string(table.column(name))
        value = pc.if_else(pc.equal(value, ""), EMPTY_KEY, pc.fill_null(value, NULL_KEY))
        parts.append(pc.binary_join_element_wise(f"{name}:", value, ""))
    return pc.binary_join_element_wise(*parts, ",")


def partition_paths(routing: Routing, table: pa.Table) -> pa.Array:
    """Each row's partition path, dictionary-encoded: each distinct path is built once, not once per row (a batch
    holds few partitions), and grouping the rows by partition (`log_writer.group_indices`) needs no hashing of
    strings. Equal to `partition_path_strings` value by value."""
    if not routing.partition_fields:
        return pa.repeat(pa.scalar(""), table.num_rows)
    fields = [pc.dictionary_encode(_as_string(table.column(name)), null_encoding="encode")
              for name in routing.partition_fields]
    if len(fields) == 1:
        paths = _path_part(routing, routing.partition_fields[0], fields[0].dictionary)
        if len(pc.unique(paths)) == len(paths):   # no two values give one path: the rows keep their indices
            return pa.DictionaryArray.from_arrays(fields[0].indices, paths)
    sizes = [len(f.dictionary) for f in fields]
    if int(np.prod(np.array(sizes, dtype=np.float64))) >= 2**62:   # combinations beyond an int64 code
        return partition_path_strings(routing, table)
    # Each row's combination of field values as one int64 code; the distinct codes are the distinct paths.
    codes = fields[0].indices.to_numpy().astype(np.int64)
    for f, size in zip(fields[1:], sizes[1:]):
        codes = codes * size + f.indices.to_numpy()
    if len(fields) == 1:
        combos, rows = np.arange(sizes[0], dtype=np.int64), codes   # dictionary_encode lists only values present
    else:
        combos, rows = np.unique(codes, return_inverse=True)
    digits, parts = combos, list[pa.Array]()
    for name, f, size in reversed(list(zip(routing.partition_fields, fields, sizes))):
        digits, digit = np.divmod(digits, size)
        parts.insert(0, _path_part(routing, name, f.dictionary.take(pa.array(digit))))
    paths = parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, "/")
    # Values that differ can give one path (null and "" are both the default partition): one entry each.
    distinct = pc.dictionary_encode(paths)
    indices = distinct.indices.to_numpy()[rows].astype(np.int32)
    return pa.DictionaryArray.from_arrays(pa.array(indices, pa.int32()), distinct.dictionary)


def _path_part(routing: Routing, name: str, raw: pa.Array) -> pa.Array:
    # Java writes null and empty partition values as the default partition.
    value = pc.if_else(pc.fill_null(pc.equal(raw, ""), True), DEFAULT_PARTITION, raw)
    return pc.binary_join_element_wise(f"{name}=", value, "") if routing.hive_style else value


def partition_path_strings(routing: Routing, table: pa.Table) -> pa.Array:
    """Each row's partition path as a string, built row by row."""
    if not routing.partition_fields:
        return pa.repeat(pa.scalar(""), table.num_rows)
    parts = [_path_part(routing, name, _as_string(table.column(name))) for name in routing.partition_fields]
    return parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, "/")


def route(routing: Routing, table: pa.Table) -> pa.Table:
    """Append the routing columns the log writer groups by, and the keys' hashes (HASH_COL)."""
    keys = record_keys(routing, table)
    if keys.null_count:
        raise ValueError(f"record key field(s) {', '.join(routing.record_keys)} contain nulls")
    hashes = spark_hash_strings(keys)
    return (table.append_column(KEY_COL, keys)
            .append_column(PART_COL, partition_paths(routing, table))
            .append_column(BUCKET_COL, pa.array(buckets_of(hashes, routing.num_buckets), pa.int32()))
            .append_column(HASH_COL, pa.array(hashes, pa.int32())))
