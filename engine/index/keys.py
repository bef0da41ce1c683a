"""Key generation on Spark: record key and partition path columns the way Java's key generators build them.

Simple key: the field's value as a string. Complex key (several fields): `f1:v1,f2:v2`
(ComplexKeyGenerator). Partition path: values joined by `/`, `field=value` when hive-style; a null
partition value becomes `__HIVE_DEFAULT_PARTITION__` as in Java.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from engine.config.properties import TableConfig

if TYPE_CHECKING:   # pyspark is imported where a column is built: writes that run in-process never load it
    from pyspark.sql import Column, DataFrame

DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"


def check_partition_path(partition: str) -> None:
    """Refuse partition values that would put files outside their partition folder (or the table)."""
    parts = partition.split("/") if partition else []
    if partition.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\\" in partition:
        raise ValueError(f"partition path {partition!r} is not a safe relative folder; partition values must not "
                         "be empty segments, '.', '..' or contain '/' or '\\'")
NULL_KEY, EMPTY_KEY = "__null__", "__empty__"


def record_key_column(cfg: TableConfig) -> Column:
    from pyspark.sql import functions as F

    fields = cfg.record_key_fields
    if len(fields) == 1:
        return F.col(fields[0]).cast("string")
    parts = []
    for name in fields:
        value = F.col(name).cast("string")
        value = F.when(value.isNull(), F.lit(NULL_KEY)).when(value == "", F.lit(EMPTY_KEY)).otherwise(value)
        parts.append(F.concat(F.lit(f"{name}:"), value))
    return F.concat_ws(",", *parts)


def partition_path_column(cfg: TableConfig) -> Column:
    from pyspark.sql import functions as F

    if not cfg.partition_fields:
        return F.lit("")
    parts = []
    for name in cfg.partition_fields:
        raw = F.col(name).cast("string")
        # Java writes null and empty partition values as the default partition.
        value = F.when(raw.isNull() | (raw == ""), F.lit(DEFAULT_PARTITION)).otherwise(raw)
        parts.append(F.concat(F.lit(f"{name}="), value) if cfg.hive_style else value)
    return F.concat_ws("/", *parts)


def bucket_column(key: Column, num_buckets: int) -> Column:
    """Bucket of a record key: pmod(murmur3_32(key, seed 42), n) — Spark's `hash`, which
    `engine.index.bucket_hash` reproduces without Spark so both write paths route keys identically."""
    from pyspark.sql import functions as F

    return F.pmod(F.hash(key), F.lit(num_buckets)).cast("int")


def arrow_schema_of(df: DataFrame) -> pa.Schema:
    """The Arrow schema Spark hands to mapInArrow for this DataFrame."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(df.schema, timezone="UTC")


def as_spark_would_convert(rows: pa.Table) -> pa.Table | None:
    """`rows` in the types `spark.createDataFrame(rows)` hands to mapInArrow (timestamps in µs, ...), computed
    without Spark; None for a type Spark has no equivalent of (that input then takes the DataFrame path,
    which reports it)."""
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

    try:
        schema = to_arrow_schema(from_arrow_schema(rows.schema), timezone="UTC")
        return rows.cast(schema)
    except (TypeError, ValueError, NotImplementedError, pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
