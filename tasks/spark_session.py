"""One warm SparkSession per worker process, started when the process starts, not on the first task.

Spark's JVM start costs seconds; a compaction clicked in the dashboard should not pay it. Each Celery
pool process starts its session at `worker_process_init` (local[*], or the cluster in `SPARK_MASTER`,
through the engine's own factory) in a background thread, so the process is ready to take tasks at
once and a task that needs Spark meanwhile simply waits for the same session (the factory is locked).
`TIDEMARK_WARM_SPARK=0` turns warming off (a worker that only samples metrics, or a low-memory host).
"""
from __future__ import annotations

import logging
import os
import threading

from celery.signals import worker_process_init, worker_process_shutdown

log = logging.getLogger(__name__)

_warming: threading.Thread | None = None


def warm_enabled() -> bool:
    return os.environ.get("TIDEMARK_WARM_SPARK", "1") not in ("0", "false", "no")


def start_session() -> None:
    """Create (or reuse) this process's SparkSession and run one trivial job to load its classes."""
    from engine.spark import get_spark

    spark = get_spark(app_name=f"tidemark-worker-{os.getpid()}")
    spark.range(1).count()
    log.info("warm SparkSession ready in worker process %s (%s)", os.getpid(), spark.sparkContext.master)


def _warm() -> None:
    try:
        start_session()
    except Exception:  # the task that needs Spark will retry and report the real error
        log.exception("could not warm the SparkSession")


@worker_process_init.connect
def warm_on_process_start(**_: object) -> None:
    global _warming
    if warm_enabled():
        _warming = threading.Thread(target=_warm, name="spark-warm", daemon=True)
        _warming.start()


@worker_process_shutdown.connect
def stop_on_process_exit(**_: object) -> None:
    from engine.spark import stop_spark

    stop_spark()


def wait_until_warm(timeout_s: float | None = None) -> bool:
    """Block until the warming thread is done (True) — for benchmarks and tests that time warm runs."""
    if _warming is None:
        return True
    _warming.join(timeout_s)
    return not _warming.is_alive()
