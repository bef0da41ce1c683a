"""Write throughput end-to-end (Parquet-file and DataFrame paths; Avro and Parquet log blocks) vs the pyarrow floor.

    python -m bench.bench_write [--records 1000000] [--repeat 3] [--scale 1.0] [--start-repeat 3] [--stages]
                                [--versus-spark]

Input: N synthetic records (anchors' schema) staged once as a Parquet file; each timed run writes it into a
fresh table: `Table.write([input], local=True)` (in-process: pyarrow routing, one thread per core writing
file groups — the default for inputs up to TIDEMARK_LOCAL_MAX_ROWS), the same on Spark local[CORES]
(`local=False`: pyarrow routing in tasks + Arrow IPC exchange), `write(spark.read.parquet(input))` as placed by
default (a DataFrame up to TIDEMARK_LOCAL_MAX_DATAFRAME_MB is written in-process: a bare Parquet scan read by
pyarrow, anything else collected with `toArrow`), the same DataFrame filtered by Spark (`seq >= 0`, keeps every
row; not a bare scan, so collected by `toArrow`), and the DataFrame with `local=False` (each input partition's rows
cross to Python as Arrow once, are routed there and exchanged as Arrow IPC files; a second stage writes the file
groups), each through block encoding, log files and commit.
The floor is `pq.write_table` of the same records with the 5 meta columns on one thread, dictionaries only for the
columns that repeat (as our Parquet blocks and base files: `engine.io.parquet_encoding`). Rates are records/s per
core; ratio = ours / floor. SparkSession start is excluded from the write timings and reported separately, in
fresh processes, with and without the JVM class-data archive (TIDEMARK_NO_CDS=1). Every variant also reports
the CPU seconds of this process and every process below it (the Spark JVM and its Python workers): records
per CPU-second, a figure a busy machine disturbs less than wall time. `--stages` instead times the pieces of a
DataFrame write alone (scan, Spark's row -> Arrow conversion, the shuffle, collecting, the pyarrow read).
`--versus-spark` instead times, in one session and interleaved, Spark's own `df.write.parquet` of a cached
DataFrame (the input read by Spark, cached, counted) against our Spark-task write of the same DataFrame
(`local=False`, Avro and Parquet log blocks): ratio = ours / Spark's, wall time (medians) and process-tree CPU.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys

import pyarrow.parquet as pq

from bench.common import emit, log, median_time, rate, records, scratch_dir, stage_parquet, timed, tree_cpu_s, with_meta_columns
from engine.io.parquet_encoding import dictionary_columns

TARGET_PER_CORE = 500_000
DATAFRAME_TARGET_PER_CORE = 300_000   # a Spark DataFrame input (Tidemark issue 18)
SETTINGS = {"hoodie.bucket.index.num.buckets": "4"}
START_SNIPPET = ("import time; t = time.perf_counter(); from engine.spark import get_spark; "
                 "get_spark(cores={cores}); print(time.perf_counter() - t)")


def spark_start_s(cores: int, cds: bool) -> float:
    """SparkSession start (import + JVM + session) in a fresh interpreter."""
    env = dict(os.environ)
    env.pop("TIDEMARK_NO_CDS", None)
    if not cds:
        env["TIDEMARK_NO_CDS"] = "1"
    out = subprocess.run([sys.executable, "-c", START_SNIPPET.format(cores=cores)], env=env, check=True,
                         capture_output=True, text=True, cwd=os.path.dirname(os.path.dirname(__file__)))
    return float(out.stdout.strip().splitlines()[-1])


def spark_start(cores: int, repeats: int) -> dict:
    spark_start_s(cores, cds=True)  # builds the archive on first use on this machine; not counted
    with_cds = median_time(lambda: spark_start_s(cores, True), repeats)
    without = median_time(lambda: spark_start_s(cores, False), repeats)
    return {"with_cds": with_cds, "without_cds": without,
            "speedup": round(without["median_s"] / with_cds["median_s"], 2)}


def new_table(path: str, block_format: str) -> None:
    from engine import Table

    shutil.rmtree(path, ignore_errors=True)
    Table.create(path, name="bench_write", record_keys=["id"], partition_fields=["region"], ordering_field="seq",
                 event_time_field="event_time", merge_mode="event_time", hive_style=True,
                 settings={**SETTINGS, "hoodie.logfile.data.block.format": block_format})


def engine_write(spark, input_path: str, table_path: str, block_format: str, n: int, cores: int,
                 repeats: int, path_kind: str) -> dict:
    from engine import Table

    cpu: list[float] = []

    def run() -> None:
        table = Table.open(table_path)
        start = tree_cpu_s()
        if path_kind.startswith("dataframe"):
            df = spark.read.parquet(input_path)
            df = df.filter("seq >= 0") if path_kind == "dataframe_filtered" else df
            result = table.write(df, "upsert", local=False if path_kind == "dataframe_spark_tasks" else None)
        else:
            result = table.write([input_path], "upsert", local=path_kind == "in_process")
        cpu.append(tree_cpu_s() - start)
        assert result.records_written == n, (result.records_written, n)

    warm = timed(lambda: (new_table(table_path, block_format), run()))[0]  # python workers, JIT; not counted
    cpu.clear()
    t = median_time(run, repeats, setup=lambda: new_table(table_path, block_format))
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(table_path) for f in fs)
    out = {**t, "warmup_s": round(warm, 3), "records_per_s_per_core": round(rate(n, t["median_s"], cores)),
           "table_bytes": size}
    cpu_s = sorted(cpu)[len(cpu) // 2]
    out.update(cpu_s=round(cpu_s, 3), records_per_cpu_s=round(n / cpu_s))
    return out


def pyarrow_floor(n_table, path: str, repeats: int) -> dict:
    table = with_meta_columns(n_table)
    dictionary = dictionary_columns(table)   # what our Parquet blocks choose (a floor with the same encoding)
    t = median_time(lambda: pq.write_table(table, path, compression="snappy", use_dictionary=dictionary), repeats)
    return {**t, "records_per_s_per_core": round(rate(table.num_rows, t["median_s"], 1)),
            "file_bytes": os.path.getsize(path)}


def dataframe_stages(spark, input_path: str, table_path: str, repeats: int) -> dict:
    """Where a DataFrame write's time goes: its pieces timed alone (wall and process-tree CPU, medians)."""
    import pyarrow as pa

    from engine.config.properties import load_table_config
    from engine.index import keys, routing
    from engine.index.routing import BUCKET_COL, PART_COL
    from engine.write import pipeline

    new_table(table_path, "avro")
    cfg = load_table_config(table_path)
    rt = routing.Routing.of(cfg)

    def drop(batches):
        for _ in batches:
            pass
        yield pa.RecordBatch.from_arrays([pa.array([], pa.string())], names=["stat"])

    def scan():
        return spark.read.parquet(input_path)

    incoming = keys.arrow_schema_of(scan())
    pieces = {
        "read_parquet_dataframe": scan,
        "scan_to_noop_sink": lambda: scan().write.format("noop").mode("overwrite").save(),
        "scan_to_map_in_arrow_dropping": lambda: scan().mapInArrow(drop, "stat string").collect(),
        "before_routing_shuffle_map_in_arrow_dropping": lambda: pipeline._with_routing(cfg, scan())
        .repartition(2, PART_COL, BUCKET_COL).mapInArrow(drop, "stat string").collect(),
        "collect_spark_routing_to_arrow": lambda: pipeline._with_routing(cfg, scan()).toArrow(),
        "collect_to_arrow_pyarrow_routing": lambda: routing.route(rt, scan().toArrow()),
        "after_pyarrow_read_cast_route": lambda: [
            routing.route(rt, chunk.cast(incoming))
            for chunk in pipeline._read_chunks(pipeline._row_group_chunks([input_path])[0])],
    }
    out = {}
    for name, fn in pieces.items():
        fn()   # warm
        runs = []
        for _ in range(max(1, repeats)):
            cpu, (wall, _) = tree_cpu_s(), timed(fn)
            runs.append((wall, tree_cpu_s() - cpu))
        wall, cpu = sorted(runs)[len(runs) // 2]
        out[name] = {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3)}
    return out


def versus_spark(spark, input_path: str, work: str, n: int, repeats: int) -> dict:
    """Our Spark-task write of a cached DataFrame next to Spark's own Parquet write of it, interleaved."""
    from engine import Table

    df = spark.read.parquet(input_path).cache()
    df.count()

    def spark_parquet() -> None:
        df.write.mode("overwrite").parquet(os.path.join(work, "spark_out"))

    def ours(fmt: str) -> None:
        path = os.path.join(work, f"t_versus_{fmt}")
        new_table(path, fmt)
        assert Table.open(path).write(df, "upsert", local=False).records_written == n

    variants = {"spark_write_parquet": spark_parquet, "ours_spark_tasks_avro": lambda: ours("avro"),
                "ours_spark_tasks_parquet": lambda: ours("parquet")}
    runs: dict[str, list[tuple[float, float]]] = {k: [] for k in variants}
    for fn in variants.values():
        fn()   # warm: python workers, JIT
    for _ in range(max(1, repeats)):
        for name, fn in variants.items():
            cpu, (wall, _) = tree_cpu_s(), timed(fn)
            runs[name].append((wall, tree_cpu_s() - cpu))
    out: dict = {"input_partitions": df.rdd.getNumPartitions()}
    for name, values in runs.items():
        walls, cpus = sorted(w for w, _ in values), sorted(c for _, c in values)
        out[name] = {"wall_s": round(walls[len(walls) // 2], 3), "cpu_s": round(cpus[len(cpus) // 2], 3),
                     "runs_s": [round(w, 3) for w, _ in values]}
    spark_s = out["spark_write_parquet"]
    for name in ("ours_spark_tasks_avro", "ours_spark_tasks_parquet"):
        out[f"ratio_{name}_vs_spark_wall"] = round(out[name]["wall_s"] / spark_s["wall_s"], 2)
        out[f"ratio_{name}_vs_spark_cpu"] = round(out[name]["cpu_s"] / spark_s["cpu_s"], 2)
    df.unpersist()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies --records")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--start-repeat", type=int, default=3, help="fresh-process Spark starts per variant (0: skip)")
    ap.add_argument("--stages", action="store_true", help="only time the DataFrame write's pieces alone")
    ap.add_argument("--versus-spark", action="store_true",
                    help="only time our Spark-task write of a cached DataFrame against Spark's df.write.parquet")
    args = ap.parse_args()
    n = max(1, int(args.records * args.scale))
    work = scratch_dir("tm-bench-write-")
    try:
        load_before = round(os.getloadavg()[0], 2)
        data = records(n)
        input_path = stage_parquet(data, work)
        log(f"bench_write: {n} records staged in {work}")
        floor = pyarrow_floor(data, os.path.join(work, "floor.parquet"), args.repeat)
        start = spark_start(args.cores, args.start_repeat) if args.start_repeat > 0 else None
        from engine.spark import get_spark

        session_s, spark = timed(lambda: get_spark(cores=args.cores))
        if args.stages:
            emit("bench_write_stages", {"records": n, "load_avg_1m_before": load_before,
                                        **dataframe_stages(spark, input_path, os.path.join(work, "t_stages"),
                                                           args.repeat)})
            return
        if args.versus_spark:
            emit("bench_write_versus_spark", {"records": n, "cores": args.cores, "load_avg_1m_before": load_before,
                                              **versus_spark(spark, input_path, work, n, args.repeat),
                                              "load_avg_1m_after": round(os.getloadavg()[0], 2)})
            return
        from engine.write.in_process import workers

        ours = {f"{kind}_{fmt}": engine_write(spark, input_path, os.path.join(work, f"t_{kind}_{fmt}"), fmt, n,
                                              workers() if kind == "in_process" else args.cores, args.repeat, kind)
                for kind in ("in_process", "parquet_input", "dataframe", "dataframe_filtered", "dataframe_spark_tasks")
                for fmt in ("avro", "parquet")}
        emit("bench_write", {
            "records": n, "cores": args.cores, "load_avg_1m_before": load_before, "operation": "upsert", "repeat": args.repeat, **ours,
            "pyarrow_floor": floor,
            **{f"ratio_{k}_vs_floor": round(v["records_per_s_per_core"] / floor["records_per_s_per_core"], 3)
               for k, v in ours.items()},
            "target_records_per_s_per_core": TARGET_PER_CORE,
            "target_dataframe_records_per_s_per_core": DATAFRAME_TARGET_PER_CORE,
            "meets_target": {f: ours[f]["records_per_s_per_core"] >= (DATAFRAME_TARGET_PER_CORE if
                                                                      f.startswith("dataframe") else TARGET_PER_CORE)
                             for f in ours},
            "spark_session_start_in_process_s": round(session_s, 3), "spark_session_start_fresh": start,
        })
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
