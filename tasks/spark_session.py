"""One warm SparkSession per worker process, started when the process starts, not on the first task.

Spark's JVM start costs seconds; a compaction clicked in the dashboard should not pay it. Each Celery
pool process starts its session at `worker_process_init` (local[*], or the cluster in `SPARK_MASTER`,
through the engine's own factory) in a background thread, so the process is ready to take tasks at
once and a task that needs Spark meanwhile simply waits for the same session (the factory is locked).
Before each run `ensure_alive` checks the JVM answers and starts a new session when it does not (and a run
that fails on a Py4J error discards a dead session at once), so a killed JVM never poisons the worker.
`TIDEMARK_WARM_SPARK=0` turns warming off (a worker that only samples metrics, or a low-memory host); such a
worker's compaction runs then go where the engine places them (a small plan in-process, without a JVM), while a
warming worker runs every compaction on its session (`tasks.operations`).
"""
from __future__ import annotations

import logging
import os
import threading

from celery.signals import worker_process_init, worker_process_shutdown

from engine import env

log = logging.getLogger(__name__)

_warming: threading.Thread | None = None


def warm_enabled() -> bool:
    return env.flag("TIDEMARK_WARM_SPARK", True)


def start_session() -> None:
    """Create (or reuse) this process's SparkSession, run one trivial job to load its classes, and start its Python
    workers with the engine imported (the first compaction would otherwise pay that: 1.8 s instead of 0.5 s)."""
    from engine.spark import get_spark, warm_python_workers

    spark = get_spark(app_name=f"tidemark-worker-{os.getpid()}")
    spark.range(1).count()
    warm_python_workers(spark)
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


def ensure_alive() -> None:
    """Before a run: a session whose JVM died (kill -9, OOM) is discarded and a fresh one started, so one
    dead JVM costs one restart instead of failing every later run of this worker."""
    from engine.spark import discard_session, session_alive

    if warm_enabled() and _warming is not None and _warming.is_alive():
        return  # still starting: the run waits for that same session through the engine's factory
    if session_alive():
        return
    log.warning("the SparkSession's JVM of worker process %s is gone; starting a new one", os.getpid())
    discard_session()
    start_session()


def is_jvm_failure(exc: BaseException) -> bool:
    """A Py4J error or a refused/reset gateway connection: the JVM is gone or going."""
    for err in (exc, exc.__cause__, exc.__context__):
        if err is None:
            continue
        if type(err).__module__.startswith("py4j") or isinstance(err, (ConnectionRefusedError, ConnectionResetError,
                                                                       BrokenPipeError)):
            return True
    return False


def forget_if_dead() -> None:
    """After a run failed on a JVM error: drop the session now if its JVM is gone (the next run starts anew)."""
    from engine.spark import discard_session, session_alive

    if not session_alive():
        log.warning("the SparkSession's JVM of worker process %s died during a run; discarding it", os.getpid())
        discard_session()
