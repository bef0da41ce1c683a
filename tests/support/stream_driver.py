"""A Structured Streaming driver for the tests: a Parquet file source (one file per micro-batch) written through
`writeStream.format("tidemark")` until every file is in.

    python -m tests.support.stream_driver <source dir> <table> <checkpoint>

Run as a subprocess, so a test can SIGKILL it mid-stream (its process group: the JVM and its Python workers with
it) and start it again on the same checkpoint. Exits 0 once the source is drained, 1 when the query failed.
"""
from __future__ import annotations

import sys

SOURCE_SCHEMA = "id long, name string, ts long, event_time timestamp, region string"


def main(source: str, table: str, checkpoint: str) -> int:
    from engine.datasource import register
    from engine.spark import get_spark

    spark = register(get_spark(cores=2))
    df = spark.readStream.schema(SOURCE_SCHEMA).option("maxFilesPerTrigger", 1).parquet(source)
    query = (df.writeStream.format("tidemark").option("checkpointLocation", checkpoint)
             .option("hoodie.datasource.write.operation", "upsert")
             .option("hoodie.datasource.write.recordkey.field", "id")
             .trigger(availableNow=True).start(table))
    try:
        query.awaitTermination()
    except Exception as exc:   # the query failed (an injected fault): report it, exit non-zero
        print(f"query failed: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
