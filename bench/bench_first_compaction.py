"""The first compaction of a long-lived driver, with and without the control plane's warm-up.

    python -m bench.bench_first_compaction [--rounds 2] [--rows 20000]

Each mode runs in a fresh process per round, as a control-plane worker starts: `get_spark()` and a trivial SQL job
(the warm-up before this change), then for "warm" also `engine.spark.warm_python_workers` (what
`tasks.spark_session` now runs in the background at worker start: Python workers started, the engine imported,
their heaps frozen). Then a small table is written in-process (6 writes x `--rows` upserts, 2 partitions x 4
buckets) and compacted twice by event time: the first compaction pays whatever the warm-up did not; the
second is the steady state. Medians over `--rounds` per mode, cold and warm processes alternating.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from bench.common import emit, log


def one(mode: str, rows: int) -> dict[str, float]:
    from bench.bench_s3_storage import T0_MS, _batch
    from engine import Table
    from engine.spark import get_spark, warm_python_workers

    spark = get_spark()
    spark.range(1).count()
    out: dict[str, float] = {}
    if mode == "warm":
        t0 = time.perf_counter()
        warm_python_workers(spark)
        out["warm_up_s"] = round(time.perf_counter() - t0, 3)
    with tempfile.TemporaryDirectory(prefix="tm-bench-first-") as tmp:
        sources = [_batch(tmp, w, rows, 2) for w in range(6)]
        table = Table.create(os.path.join(tmp, "t"), name="b", record_keys=["id"], ordering_field="seq",
                             event_time_field="ts", partition_fields=["region"],
                             settings={"hoodie.bucket.index.num.buckets": "4"})
        for src in sources:
            table.write(src)
        for name, days in (("first_s", 3), ("second_s", 5)):
            plan = table.schedule_compaction(threshold=T0_MS + days * 86_400_000)
            t0 = time.perf_counter()
            table.run_compaction(plan.instant)
            out[name] = round(time.perf_counter() - t0, 3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--one", choices=("cold", "warm"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.rows)), flush=True)
        return
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    runs: dict[str, list[dict[str, float]]] = {"cold": [], "warm": []}
    for r in range(args.rounds):
        for mode in ("cold", "warm"):
            proc = subprocess.run([sys.executable, "-m", "bench.bench_first_compaction", "--one", mode,
                                   "--rows", str(args.rows)], cwd=here, capture_output=True, text=True, check=True)
            runs[mode].append(json.loads(proc.stdout.strip().splitlines()[-1]))
            log(f"  round {r} {mode}: {runs[mode][-1]}")
    out: dict = {"params": vars(args), "runs": runs}
    for mode, rs in runs.items():
        for key in rs[0]:
            out[f"{mode}_{key}"] = round(statistics.median(x[key] for x in rs), 3)
    out["first_cold_over_warm"] = round(out["cold_first_s"] / out["warm_first_s"], 2)
    emit("bench_first_compaction", out)


if __name__ == "__main__":
    main()
