"""Beat's schedule: the periodic tasks and how often they run (seconds, overridable from the environment).

Per-table schedules live in the database (RegisteredTable.schedule_minutes): one task every minute
queues the tables that are due, so registering or editing a table needs no beat restart.
"""
from __future__ import annotations

from typing import Any

from engine import env
from webapp.queues import sampling_queue


def _seconds(name: str, default: float) -> float:
    return env.number(name, default, unit="seconds")


def beat_schedule() -> dict[str, dict[str, Any]]:
    return {
        "trigger-due-tables": {"task": "tasks.jobs.trigger_due_tables",
                               "schedule": _seconds("TIDEMARK_TRIGGER_CHECK_SECONDS", 60)},
        "sample-all-tables": {"task": "tasks.jobs.sample_all_tables",
                              "schedule": _seconds("TIDEMARK_SAMPLE_SECONDS", 300),
                              "options": {"queue": sampling_queue()}},
        "roll-up-samples": {"task": "tasks.jobs.roll_up_samples",
                            "schedule": _seconds("TIDEMARK_ROLLUP_SECONDS", 3600)},
        "sync-owed-catalogs": {"task": "tasks.jobs.sync_owed_catalogs",
                               "schedule": _seconds("TIDEMARK_CATALOG_SYNC_SECONDS", 60)},
        # On the sampling queue: the sampling worker (no Spark, never behind a compaction) sweeps whatever the
        # compaction workers do — stopped, busy or dead is exactly when a queued run must be failed on time.
        "sweep-lost-runs": {"task": "tasks.jobs.sweep_lost_runs",
                            "schedule": _seconds("TIDEMARK_SWEEP_SECONDS", 30),
                            "options": {"queue": sampling_queue()}},
    }
