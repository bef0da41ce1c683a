"""`manage.py tidemark_discover ROOT`: register every Hudi table under ROOT (webapp.tables.discovery).

Idempotent (tables already registered by path are reported, not touched); `--dry-run` reports what
would be registered without writing anything. Exits 1 when any table found was refused.
"""
from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from webapp.tables import discovery, inputs


class Command(BaseCommand):
    help = "Register every Hudi table (folder with .hoodie/hoodie.properties) under ROOT."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("root", help="a folder at or under one of TIDEMARK_TABLE_ROOTS")
        parser.add_argument("--dry-run", action="store_true", help="report what would be registered; write nothing")
        parser.add_argument("--prefix", default="", help="put this before every derived name (e.g. sales-)")
        parser.add_argument("--schedule-minutes", help="event-time trigger every N minutes for the new tables")
        parser.add_argument("--data-latency", help='data latency of the new tables, e.g. "2h"')
        parser.add_argument("--sla-minutes", help="freshness SLA of the new tables, in minutes")
        parser.add_argument("--carry-over", help="symlink (default) or copy")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print the report as JSON")

    def handle(self, *args: Any, root: str, dry_run: bool, prefix: str, as_json: bool, **options: Any) -> None:
        try:
            defaults = discovery.Defaults.parse({"schedule_minutes": options["schedule_minutes"],
                                                 "data_latency": options["data_latency"],
                                                 "freshness_sla_minutes": options["sla_minutes"],
                                                 "carry_over": options["carry_over"]})
            report = discovery.discover(None, root, dry_run=dry_run, prefix=prefix, defaults=defaults)
        except inputs.InvalidInput as exc:
            raise CommandError(str(exc)) from None
        if as_json:
            self.stdout.write(_json(report.to_dict()))
        else:
            self._print(report)
        if report.count("refused"):
            raise SystemExit(1)

    def _print(self, report: discovery.Report) -> None:
        for c in report.candidates:
            outcome = "would register" if report.dry_run and c.outcome == "new" else c.outcome
            line = f"{outcome:20} {c.name or '-':40} {c.path}"
            self.stdout.write(line + (f"  ({c.reason})" if c.reason else ""))
        counts = report.summary()
        verb = "would register" if report.dry_run else "registered"
        self.stdout.write(f"{counts['found']} tables under {report.root}: {counts['new'] + counts['registered']} "
                          f"{verb}, {counts['already_registered']} already registered, {counts['refused']} refused"
                          + (" (dry run: nothing written)" if report.dry_run else ""))


def _json(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2)
