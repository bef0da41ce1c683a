"""Executor side of an overwrite: the rows of one (partition, bucket) become the base file of a new file group.

Java's insert_overwrite[_table] on a MERGE_ON_READ table writes every bucket as an INSERT into a *new*
file group with a Parquet base file (SparkBucketIndexPartitioner: "insert overwrite always generates new
bucket file id"; the hudi-rs fixture `v6_simplekeygen_nonhivestyle_overwritetable` holds such a base).
Our new group's id comes from (instant, partition, bucket) like any new group of ours, so every attempt
of a task writes the same group, and it can never equal a replaced group's id (made by an earlier instant,
or a random uuid by Java). The file is written under `.hoodie/.temp/<instant>/` and linked into the
partition without clobbering; rows are pre-combined first, so the base holds one record per key.
"""
from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from engine.config import eventtime
from engine.config.schema import arrow_schema
from engine.io import storage
from engine.io.naming import BaseFileName
from engine.io.parquet_encoding import dictionary_columns
from engine.timeline.metadata import WriteStat
from engine.write.job import WriteJob, group_file_id, precombine, with_meta


def write_new_group(job: WriteJob, partition: str, bucket: int, rows: pa.Table, token: str) -> list[dict[str, Any]]:
    """Write `rows` as the base file of a new file group; returns its one write stat (Java's form)."""
    file_id = group_file_id(job.instant, partition, bucket)
    name = BaseFileName(file_id, token, job.instant).name
    records = precombine(job, with_meta(job, partition, name, rows, token))
    temp_dir = storage.join(job.base_path, ".hoodie", ".temp", job.instant)
    rel = f"{partition}/{name}" if partition else name
    final = storage.join(job.base_path, rel)
    with storage.publishing(final, temp_dir) as out:
        _write_parquet(job, records, out)
        size = out.tell()
    lo, hi = (eventtime.bounds(records.column(job.event_time_field)) if job.event_time_field
              else (None, None))
    return [WriteStat(file_id=file_id, path=rel, partition_path=partition, num_writes=records.num_rows,
                       num_inserts=records.num_rows, total_write_bytes=size, file_size=size,
                       min_event_time=lo, max_event_time=hi).to_json()]


def _write_parquet(job: WriteJob, records: pa.Table, path: str | pa.NativeFile) -> None:
    codec = "NONE" if job.compression == "none" else job.compression
    schema = arrow_schema(job.avro_schema)
    keys = pc.min_max(records.column("_hoodie_record_key"))
    records = records.cast(schema)
    with pq.ParquetWriter(path, schema, compression=codec, use_dictionary=dictionary_columns(records)) as writer:
        writer.write_table(records, row_group_size=job.row_group_rows)
        if records.num_rows:
            # Java's footer keys (HoodieAvroWriteSupport); readers that prune by key range use them.
            writer.add_key_value_metadata({"hoodie_min_record_key": keys["min"].as_py(),
                                           "hoodie_max_record_key": keys["max"].as_py()})
