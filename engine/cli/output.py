"""Rendering the CLI's results: JSON (`--json`: the results' `to_dict()`, ISO-8601 UTC times) or text.

Progress bars go to stderr and only on a terminal: piped or redirected output stays clean.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import json
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TextIO

from engine import results as r
from engine.errors import Refused, TidemarkWarning
from engine.humanize import human
from engine.progress import Progress


def _jsonable(data: Any) -> Any:
    if isinstance(data, r.Result):
        return data.to_dict()
    if isinstance(data, (list, tuple)):
        return [_jsonable(d) for d in data]
    return data


def emit(data: Any, as_json: bool, render: Callable[[Any], str]) -> None:
    """Print `data` as JSON or through its text renderer (stdout)."""
    print(json.dumps(_jsonable(data), indent=2) if as_json else render(data))


def refusal(refused: Refused, as_json: bool) -> None:
    """A refusal: JSON on stdout with --json (reason code and blocking instant), else a line on stderr."""
    if as_json:
        print(json.dumps(refused.to_dict(), indent=2))
    else:
        where = f" (blocked by {refused.blocking_instant})" if refused.blocking_instant else ""
        print(f"tidemark: refused [{refused.reason}]{where}: {refused.message}", file=sys.stderr)


def error(message: str) -> None:
    print(f"tidemark: error: {message}", file=sys.stderr)


def route_warnings() -> None:
    """Tidemark's warnings (a skipped corrupt block, ...) as `tidemark: warning: ...` lines on stderr; other
    warnings as Python prints them. Idempotent."""
    current = warnings.showwarning
    if getattr(current, "tidemark", False):
        return

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: TextIO | None = None, line: str | None = None) -> None:
        if issubclass(category, TidemarkWarning):
            print(f"tidemark: warning: {message}", file=sys.stderr)
        else:
            current(message, category, filename, lineno, file, line)

    show.tidemark = True  # type: ignore[attr-defined]
    warnings.showwarning = show


@contextlib.contextmanager
def progress_bar(label: str) -> Iterator[Progress | None]:
    """An `on_progress` callback drawing a bar on stderr when it is a terminal; None otherwise."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
    from rich.progress import Progress as Bar

    with Bar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
             console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=None)

        def update(done: int, total: int, unit: str) -> None:
            bar.update(task, completed=done, total=total or None, description=f"{label} ({unit})")

        yield update


# ------------------------------------------------------------------------------------------ text renderers

def _t(value: Any) -> str:
    """A time (or anything) for text output."""
    return "-" if value is None else (r.iso(value) or "-") if hasattr(value, "tzinfo") else str(value)


def kv_lines(result: r.Result) -> str:
    return "\n".join(f"{k}: {human(v)}" for k, v in result.to_dict().items())


def created(d: r.TableDescription) -> str:
    return f"created table {d.table} at {d.path}"


def write(w: r.WriteResult) -> str:
    if w.action == "deltacommit":
        return w.instant
    replaced = sum(len(ids) for ids in w.replaced_file_groups.values())
    return f"{w.instant} ({w.action}: {len(w.base_files)} new file group(s), {replaced} replaced)"


def catalog_sync(c: r.CatalogSyncResult) -> str:
    where = f"{c.database}.{{{','.join(c.tables)}}} in {c.catalog}"
    if c.skipped:
        return f"nothing synced to {where}: {c.skipped}"
    if not c.ok:
        return f"sync of {where} failed: {c.error}"
    ro = f", RO completion {_t(c.ro_completion_time)} ({c.ro_completion_instant})" if c.ro_completion_instant else ""
    return f"synced {where}: {c.partitions} partition(s), last commit {c.last_commit_time_sync}{ro}"


def catalog_syncs(results: Sequence[r.CatalogSyncResult]) -> str:
    return "\n".join(catalog_sync(c) for c in results)


def read(rr: r.ReadResult) -> str:
    if rr.query == "incremental":
        return f"wrote {rr.rows} rows changed in ({rr.begin_instant or 'start'}, {rr.end_instant or 'latest'}] to {rr.output}"
    if rr.query == "time_travel":
        return f"wrote {rr.rows} rows as of {rr.as_of_instant} to {rr.output}"
    return f"wrote {rr.rows} rows to {rr.output}"


# Widest a value is shown in `rows_text` (longer ones end in "…").
CELL_CHARS = 40


def _value(value: Any) -> str:
    """A row's value as text: times ISO-8601 (UTC when they have a zone), null for None."""
    if value is None:
        return "null"
    if isinstance(value, dt.datetime):
        return value.isoformat() if value.tzinfo is None else r.iso(value) or ""
    return str(value)


def _cell(value: Any) -> str:
    text = _value(value)
    return text if len(text) <= CELL_CHARS else text[:CELL_CHARS - 1] + "…"


def rows_text(rr: r.ReadResult) -> str:
    """`Table.head`'s rows as an aligned text table of the table's own columns (Hudi's `_hoodie_*` left out)."""
    table = rr.table
    if table is None:
        return ""
    names = [n for n in table.column_names if not n.startswith("_hoodie_")]
    cells = [[_cell(v) for v in table.column(n).to_pylist()] for n in names]
    widths = [max([len(n), *map(len, col)]) for n, col in zip(names, cells)]
    lines = ["  ".join(n.ljust(w) for n, w in zip(names, widths)).rstrip()]
    lines += ["  ".join(col[i].ljust(w) for col, w in zip(cells, widths)).rstrip() for i in range(table.num_rows)]
    return "\n".join(lines)


def rows_json(rr: r.ReadResult) -> str:
    """`Table.head`'s rows as JSON Lines, every column (times ISO-8601 UTC)."""
    if rr.table is None:
        return ""
    return "\n".join(json.dumps(row, default=_value) for row in rr.table.to_pylist())


def head_note(rr: r.ReadResult) -> str:
    what = {"read_optimized": "read-optimized view", "incremental": "incremental read",
            "time_travel": f"table as of {rr.as_of_instant}"}.get(rr.query, rr.query)
    if rr.more:
        return (f"the first {rr.rows} rows of the {what}; more follow (--limit N shows more, --output FILE writes "
                "them all)")
    return f"{rr.rows} row{'' if rr.rows == 1 else 's'} of the {what}"


def describe(d: r.TableDescription) -> str:
    lines = [f"table {d.table} (v{d.table_version}, {d.merge_mode}) at {d.path}",
             f"  record key {','.join(d.record_key)}; partitions {','.join(d.partition_fields) or '-'}; "
             f"ordering {d.ordering_field}; event time {d.event_time_field}", "timeline:"]
    lines += [f"  {i.instant} {i.action:<13} {i.state}{_completed_at(i)}" for i in d.timeline]
    lines.append("file groups:")
    for g in d.file_groups:
        lines.append(f"  {g.partition or '(root)'} / {g.file_id}")
        for s in g.slices:
            lines.append(f"    slice {s.base_instant}: base {s.base_file or '-'}")
            lines += [f"      {lf.name}  {lf.size} B  {lf.blocks} blocks  min event time {_t(lf.min_event_time)}"
                      + (f"  CORRUPT BLOCKS {lf.corrupt_blocks}" if lf.corrupt_blocks else "")
                      for lf in s.log_files]
    if d.replaced_file_groups:
        lines.append("replaced file groups (hidden from every query until cleaned):")
        lines += [f"  {g.partition or '(root)'} / {g.file_id}  by {g.replaced_by}" for g in d.replaced_file_groups]
    if d.lock is not None and d.lock.provider == "storage":
        lk = d.lock
        who = f" by {lk.owner} until {_t(lk.valid_until)}" if lk.state == "held" else ""
        lines.append(f"lock: Hudi storage lock {lk.lock_object}: {lk.state}{who}")
    if d.corrupt_log_blocks:
        lines.append(f"{d.corrupt_log_blocks} corrupt log block(s) of committed instants: their records are "
                     "missing from reads and compaction refuses their logs")
    if d.activity is not None:
        lines += activity_lines(d.activity)
    return "\n".join(lines)


def activity_lines(a: r.TableActivity) -> list[str]:
    """Housekeeping and ingestion; a setting the table does not set is marked as Hudi's default."""
    h, i = a.housekeeping, a.ingestion
    def dflt(key: str | None) -> str:
        return " (default)" if h.source(key) == "default" else ""

    lines = ["housekeeping:",
             f"  clean: {h.clean_policy}{dflt('hoodie.cleaner.policy')}, retain {h.clean_retained} "
             f"{h.clean_retained_unit}{dflt(h.clean_retained_key)}; automatic "
             f"{'on' if h.clean_automatic else 'off'}{dflt('hoodie.clean.automatic')}"
             f"{', async' if h.clean_async else ''}",
             "  last clean: " + (f"{h.last_clean} at {_t(h.last_clean_at)}, deleted "
                                 f"{'?' if h.last_clean_files_deleted is None else h.last_clean_files_deleted} file(s)"
                                 if h.last_clean else "none on the active timeline"),
             f"  archival: automatic {'on' if h.archive_automatic else 'off'}{dflt('hoodie.archive.automatic')}, "
             f"keep {h.archive_min_commits}-{h.archive_max_commits} commits{dflt('hoodie.keep.min.commits')}; "
             f"{'instants archived' if h.archived else 'nothing archived'}",
             f"  active timeline: {h.active_instants} instant(s) in {h.active_instant_files} file(s)",
             "ingestion:"]
    if i.last_write is None:
        return [*lines, "  no write on the active timeline"]
    lag = "" if i.lag_seconds is None else f", {_duration(i.lag_seconds)} ago"
    lines.append(f"  last write: {i.last_write} {i.last_write_action} ({i.last_write_operation or '?'}) at "
                 f"{_t(i.last_write_at)}{lag}")
    if i.stream is not None:
        st = i.stream
        lines.append(f"  stream: query {st.query_id or '?'}, batch {'?' if st.batch_id is None else st.batch_id}, "
                     f"watermark {_t(st.watermark)}")
    return lines


def _duration(seconds: float) -> str:
    """"3d 4h", "2h 5m", "4m 10s", "12s": the two largest units."""
    s = int(seconds)
    parts = [(s // 86400, "d"), (s % 86400 // 3600, "h"), (s % 3600 // 60, "m"), (s % 60, "s")]
    while len(parts) > 1 and parts[0][0] == 0:
        parts.pop(0)
    return " ".join(f"{n}{u}" for n, u in parts[:2])


def demo(d: dict[str, Any]) -> str:
    head = f"loaded {d['rows_written']} rows of {d['flights']} flights into {d['path']}"
    return "\n".join([head, *[f"  {w}" for w in d["writes"]]])


def plan(p: r.CompactionPlan) -> str:
    if not p.operations:
        return p.message or "nothing to compact"
    head = {"preview": "would schedule compaction", "requested": "scheduled compaction"}.get(p.state, "compaction")
    lines = [f"{head} {p.instant or ''} ({p.strategy}, threshold {_t(p.threshold)}, carry-over {p.carry_over}"
             f"{', exact' if p.exact else ''}): {len(p.operations)} file group(s), "
             f"{sum(len(o.logs_compacted) for o in p.operations)} logs compacted, "
             f"{sum(len(o.logs_carried) for o in p.operations)} carried".replace("  ", " ")]
    lines += [f"  {name} = {human(u.value)} ({u.source})" for name, u in p.settings_used.items()]
    return "\n".join(lines)


def compaction_detail(p: r.CompactionPlan) -> str:
    lines = [f"compaction {p.instant} [{p.state}] strategy {p.strategy}, threshold {_t(p.threshold)}, "
             f"carry-over {p.carry_over}{', exact' if p.exact else ''}"]
    lines += [f"  {name} = {human(u.value)} ({u.source})" for name, u in p.settings_used.items()]
    for o in p.operations:
        lines.append(f"  {o.partition or '(root)'} / {o.file_id}: base {o.base_file or '-'}"
                     + (f" -> {o.new_base_file}" if o.new_base_file else ""))
        lines += [f"    compacted {name}" for name in o.logs_compacted]
        lines += [f"    carried   {c.name} -> {c.target} ({c.mode})" for c in o.logs_carried]
    if p.result is not None:
        lines.append(f"  RO completion time {_t(p.result.ro_completion_time)}, "
                     f"RO freshness time {_t(p.result.ro_freshness_time)}")
    return "\n".join(lines)


def run(c: r.CompactionResult) -> str:
    return (f"compaction {c.instant} committed: {len(c.base_files)} base files, {c.records_written} records, "
            f"{c.logs_carried_over} logs carried over, {len(c.spill_logs)} exact-mode spill logs\n"
            f"RO completion time {_t(c.ro_completion_time)}, RO freshness time {_t(c.ro_freshness_time)}")


def rollback(rb: r.RollbackResult) -> str:
    first = [f"rolled back write {w} first: its writer's heartbeat expired" for w in rb.expired_writes]
    return "\n".join(first + [f"rolled back {rb.action} {rb.instant} as rollback {rb.rollback_instant}: deleted "
                               f"{len(rb.deleted_files)} file(s), wrote {len(rb.rollback_log_files)} rollback block(s)"])


def clean(c: r.CleanResult) -> str:
    lines = [c.message or f"deleted {c.total_deleted} files"]
    listing = c.files_to_delete if c.dry_run else c.deleted
    verb = "would delete" if c.dry_run else "deleted"
    lines += [f"  {verb} {p}/{n}" for p, names in listing.items() for n in names]
    lines += [f"  {'would remove' if c.dry_run else 'removed'} {path} (left by a rolled-back write)" for path in c.orphans]
    lines += [f"  error: {e}" for e in c.errors]
    return "\n".join(lines)


def compactions(rows: Sequence[r.CompactionSummary]) -> str:
    if not rows:
        return "no compactions on the active timeline"
    head = f"{'instant':<18} {'state':<10} {'threshold':<25} {'groups':>6} {'compacted':>9} {'carried':>7}"
    lines = [f"{c.instant:<18} {c.state:<10} {_t(c.threshold):<25} {c.file_groups or 0:>6} "
             f"{c.logs_compacted or 0:>9} {c.logs_carried or 0:>7}" for c in rows]
    return "\n".join([head, *lines])


def freshness(f: r.Freshness) -> str:
    return f.message


def metrics(m: r.BacklogMetrics) -> str:
    return kv_lines(m)


def timeline(rows: Sequence[r.InstantInfo]) -> str:
    return "\n".join(f"{i.instant} {i.action:<13} {i.state}{_completed_at(i)}{' (archived)' if i.archived else ''}"
                     for i in rows) or "empty timeline"


def archive(a: r.ArchiveResult) -> str:
    return a.message


def _completed_at(i: r.InstantInfo) -> str:
    """Table version 8 names each completed instant's completion time; version 6 records none."""
    return f" at {i.completion_time}" if i.completion_time else ""


def tide(rows: Sequence[r.TideBucket], lag: dt.timedelta | None = None) -> str:
    lag_line = "freshness lag: " + ("unknown (no data)" if lag is None else f"{lag.total_seconds():g} s")
    if not rows:
        return "no uncompacted logs\n" + lag_line
    return "\n".join([f"{_t(b.start) if b.start else 'unknown':<25} {b.log_files:>5} logs "
                      f"{'?' if b.log_records is None else b.log_records:>10} records {b.log_bytes:>12} B"
                      for b in rows] + [lag_line])


def recover(rc: r.RecoverResult) -> str:
    return "\n".join([rc.message, *(f"  removed {path}" for path in rc.removed_orphans)])


def validation(v: r.PlanValidation) -> str:
    """Hudi CLI's `compaction validate` table: one line per file group, Valid or Error with the reasons."""
    lines = [f"compaction {v.instant} ({v.state}): {'valid' if v.valid else 'INVALID'}"]
    for g in v.file_groups:
        where = f"{g.partition}/{g.file_id}" if g.partition else g.file_id
        since = f", {len(g.logs_written_since)} written since" if g.logs_written_since else ""
        lines.append(f"  {where}  {g.status}  ({g.logs_compacted} log(s) compacted, {g.logs_carried} carried{since})")
        lines += [f"      {e}" for e in g.errors]
    return "\n".join(lines)


def _renames(renames: Sequence[r.LogRename], dry_run: bool) -> list[str]:
    verb = "would rename" if dry_run else "renamed"
    return [f"  {verb} {x.partition + '/' if x.partition else ''}{x.source} -> {x.target}" for x in renames]


def unschedule(u: r.UnscheduleResult) -> str:
    return "\n".join([u.message, *_renames(u.renames, u.dry_run)])


def repair(rp: r.RepairResult) -> str:
    lines = [rp.message, *_renames(rp.renames, rp.dry_run)]
    if rp.validation is not None and not rp.validation.valid:
        lines.append(validation(rp.validation))
    return "\n".join(lines)
