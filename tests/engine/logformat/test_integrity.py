"""Corrupt log blocks: a committed block's damage is reported by every read, counted by `show` and metrics, and never
compacted away; a torn tail of a failed write stays silently skippable, as in Hudi (engine.logformat.integrity)."""
from __future__ import annotations

import datetime as dt
import json
import os
import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import Table
from engine.cli import main
from engine.compaction import schedule_compaction
from engine.config.layout import create_table
from engine.datasource import load_table
from engine.errors import CorruptLogBlockError
from engine.io.faults import ENV as FAULT_ENV
from engine.logformat import BlockType, encode_data_block, encode_rollback_block, integrity, scan_log_file
from engine.logformat.integrity import CorruptLogBlockWarning
from engine.read.query import read_arrow
from engine.slices.fsview import FileSystemView
from engine.timeline.instants import Timeline
from engine.write.pipeline import WriteError, write_dataframe
from tests.support.oracle import hudi_read, rows_by_key

# ------------------------------------------------------------------------------------------------ helpers

def _days_table(tmp: Path, days: int = 3) -> Table:
    """One file group, one log per day; day d writes keys a<d>, b<d> (no key is written twice)."""
    table = Table.create(str(tmp / "t"), name="t", record_keys=["id"], ordering_field="seq", event_time_field="ts",
                         settings={"hoodie.bucket.index.num.buckets": "1"})
    for day in range(1, days + 1):
        src = tmp / f"day{day}.jsonl"
        src.write_text("".join(f'{{"id":"{k}{day}","seq":1,"ts":"2024-01-0{day}T0{i}:00:00Z"}}\n'
                               for i, k in enumerate("ab")))
        table.write(str(src))
    return table


def _logs(path: str) -> list[str]:
    (sl,) = FileSystemView(path).latest_slices()
    return [lf.path for lf in sl.log_files]


def _flip(log: str, at_content: int) -> bytes:
    """XOR 0x7F into the byte `at_content` bytes into the content of the log's only (Avro) block; framing
    (lengths, trailer, MAGIC) stays intact. Returns the original bytes."""
    (info,) = scan_log_file(log).blocks
    assert info.block_type is BlockType.AVRO_DATA
    original = Path(log).read_bytes()
    data = bytearray(original)
    data[info.content_offset + at_content] ^= 0x7F
    Path(log).write_bytes(bytes(data))
    assert scan_log_file(log).corrupt == []  # the header scan cannot see it
    return original


RECORD_COUNT = 4   # the int32 record count after the content version: a content-prefix check sees it
FIRST_RECORD = 8   # the first record's int32 length: only a decode sees it


def _keys(rows: pa.Table) -> list[str]:
    return sorted(rows.column("id").to_pylist())


def _quiet(fn, *args, **kwargs):
    """Call fn and return (result, the CorruptLogBlockWarnings it emitted)."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = fn(*args, **kwargs)
    return out, [w for w in seen if issubclass(w.category, CorruptLogBlockWarning)]


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _listing(path: str) -> dict[str, bytes]:
    out = {}
    for root, _, names in os.walk(path):
        if ".hoodie" in root:
            continue
        for n in names:
            out[os.path.relpath(os.path.join(root, n), path)] = Path(root, n).read_bytes()
    return out


# ------------------------------------------------------------------------------------------------ tests

def test_corrupt_block_is_reported_and_never_compacted(spark, tmp_path):
    path = str(tmp_path / "t")
    create_table(path, name="t", record_keys=["id"], ordering_field="seq", event_time_field="ts",
                 settings={"hoodie.bucket.index.num.buckets": "1"})
    for day in (1, 2):
        ts = pa.array([dt.datetime(2024, 1, day)] * 2, pa.timestamp("ms", tz="UTC"))
        write_dataframe(path, spark.createDataFrame(pa.table({"id": [f"a{day}", f"b{day}"], "seq": [1, 1], "ts": ts})))
    (sl,) = FileSystemView(path).latest_slices()
    first = sl.log_files[0].path
    data = bytearray(open(first, "rb").read())
    data[-3] ^= 0xFF  # break the trailing length check of the only block
    with open(first, "wb") as fh:
        fh.write(data)
    with pytest.warns(CorruptLogBlockWarning, match=f"{os.path.basename(first)} at offset 0"):
        rows = read_arrow(path)
    assert sorted(rows.column("id").to_pylist()) == ["a2", "b2"]  # the other log is still read
    with pytest.raises(CorruptLogBlockError, match="refusing to compact"):
        schedule_compaction(path, strategy="unbounded")
    assert not [f for f in os.listdir(os.path.join(path, ".hoodie")) if "compaction" in f]


def test_committed_or_torn_follows_the_instant_else_what_comes_after(tmp_path):
    """The rule on raw log files: a readable INSTANT_TIME decides; without one, a data block after the region
    means committed data was hit, while the end of the file or a rollback block after it means a torn tail."""
    table = pa.table({"_hoodie_record_key": ["k"], "v": [1]})
    schema = {"type": "record", "name": "r", "fields": [{"name": "_hoodie_record_key", "type": ["null", "string"]},
                                                        {"name": "v", "type": ["null", "long"]}]}
    c1, c2, failed = "20240101000000001", "20240101000000002", "20240101000000003"
    good1, good2 = encode_data_block(table, schema, c1), encode_data_block(table, schema, c2)
    headless = b"#HUDI#" + b"\x00" * 20   # MAGIC, then garbage: no header to read
    cases = {
        "trailing_garbage": ([good1, headless], "torn"),
        "garbage_before_data": ([good1, headless, good2], "committed"),
        "garbage_under_rollback": ([good1, headless, encode_rollback_block("20240101000000004", failed)], "torn"),
        "truncated_committed": ([good1, good2[:-10]], "committed"),
        "truncated_failed_write": ([good1, encode_data_block(table, schema, failed)[:-10]], "torn"),
    }
    for name, (blocks, kind) in cases.items():
        log = tmp_path / f"{name}.log"
        log.write_bytes(b"".join(blocks))
        found = integrity.scan_corruption([str(log)], {c1, c2})
        assert (len(found.committed), len(found.torn)) == ((1, 0) if kind == "committed" else (0, 1)), name


def test_flipped_payload_bytes_are_reported_by_every_read(spark, tmp_path):
    table = _days_table(tmp_path)
    path = table.path
    log = _logs(path)[1]
    _flip(log, FIRST_RECORD)
    where = f"{os.path.basename(log)} at offset 0"
    with pytest.warns(CorruptLogBlockWarning, match=where):
        rows = read_arrow(path)
    assert _keys(rows) == ["a1", "a3", "b1", "b3"]
    with pytest.warns(CorruptLogBlockWarning, match=where):
        assert table.read().rows == 4
    with pytest.raises(CorruptLogBlockError, match=where):
        read_arrow(path, fail_on_corrupt=True)
    # Spark: executors skip the block (warning in their log), or fail the query when asked to.
    assert sorted(r["id"] for r in load_table(spark, path).collect()) == ["a1", "a3", "b1", "b3"]
    with pytest.raises(Exception, match=os.path.basename(log)):
        spark.read.format("tidemark").option("failOnCorrupt", "true").load(path).collect()


@pytest.mark.parametrize("flags", [["--spark"], ["--local"]], ids=["spark", "local"])
def test_cli_read_fails_on_a_corrupt_committed_block_unless_told_to_skip(spark, tmp_path, capsys, flags):
    path = _days_table(tmp_path).path
    log = _logs(path)[0]
    _flip(log, FIRST_RECORD)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out_file = out_dir / "rows.parquet"
    code, out, err = run(capsys, "read", path, "--output", str(out_file), *flags)
    errors = [ln for ln in err.splitlines() if ln.startswith("tidemark: error:")]
    assert code == 1 and out == "" and len(errors) == 1, err
    assert f"{os.path.basename(log)} at offset 0" in errors[0]
    assert os.listdir(out_dir) == []   # no output, no partial or temporary file
    code, _, err = run(capsys, "read", path, "--output", str(out_file), "--skip-corrupt", *flags)
    warned = [ln for ln in err.splitlines() if ln.startswith("tidemark: warning:")]
    assert code == 0 and len(warned) == 1 and os.path.basename(log) in warned[0], err
    assert _keys(pq.read_table(out_file)) == ["a2", "a3", "b2", "b3"]
    assert os.listdir(out_dir) == ["rows.parquet"]


def test_show_metrics_and_planning_see_a_corrupt_content_prefix(spark, tmp_path, capsys):
    table = _days_table(tmp_path)
    path = table.path
    logs = _logs(path)
    _flip(logs[1], RECORD_COUNT)
    code, out, err = run(capsys, "show", path, "--json")
    assert code == 0, err
    shown = json.loads(out)
    per_log = {lf["name"]: lf["corrupt_blocks"] for g in shown["file_groups"] for s in g["slices"]
               for lf in s["log_files"]}
    assert shown["corrupt_log_blocks"] == 1 and per_log == {os.path.basename(p): int(p == logs[1]) for p in logs}
    code, out, err = run(capsys, "metrics", path, "--json")
    assert code == 0 and json.loads(out)["corrupt_log_blocks"] == 1, err
    assert table.metrics().corrupt_log_blocks == 1   # what the control plane samples and /metrics exports
    # Found at planning, so even a Spark read warns in the caller's process.
    with pytest.warns(CorruptLogBlockWarning, match=f"{os.path.basename(logs[1])} at offset 0"):
        df = load_table(spark, path)
    assert sorted(r["id"] for r in df.collect()) == ["a1", "a3", "b1", "b3"]
    with pytest.raises(CorruptLogBlockError, match=f"refusing to compact.*{os.path.basename(logs[1])} at offset 0"):
        table.schedule_compaction(strategy="unbounded")
    assert Timeline.load(path).pending_compactions() == []


def test_compaction_that_cannot_decode_a_block_fails_and_loses_nothing(spark, tmp_path):
    table = _days_table(tmp_path)
    path = table.path
    log = _logs(path)[0]
    original = _flip(log, FIRST_RECORD)
    before, _ = _quiet(read_arrow, path)
    assert _keys(before) == ["a2", "a3", "b2", "b3"]
    files = _listing(path)
    plan = table.schedule_compaction(strategy="unbounded")  # headers and content prefixes are fine
    assert plan.instant is not None
    with pytest.raises(CorruptLogBlockError, match=f"compaction {plan.instant} failed.*"
                                                   f"{os.path.basename(log)} at offset 0.*was rolled back"):
        table.run_compaction()   # a plan that cannot run rolls itself back: nothing left pending
    assert not Timeline.load(path).get(plan.instant)
    assert Timeline.load(path).pending_compactions() == []
    assert _listing(path) == files   # nothing deleted, nothing left behind, the damaged log untouched
    after, warned = _quiet(read_arrow, path)
    assert warned and after == before
    Path(log).write_bytes(original)   # repaired: every record is back, as hudi 0.5.0 reads it
    repaired, warned = _quiet(read_arrow, path)
    assert not warned and _keys(repaired) == ["a1", "a2", "a3", "b1", "b2", "b3"]
    assert rows_by_key(repaired) == rows_by_key(hudi_read(path))


def test_torn_tail_of_a_failed_write_is_skipped_silently_and_compacts(spark, tmp_path, monkeypatch):
    table = _days_table(tmp_path, days=2)
    path = table.path
    src = tmp_path / "late.jsonl"
    src.write_text('{"id":"x","seq":1,"ts":"2024-01-03T00:00:00Z"}\n')
    monkeypatch.setenv(FAULT_ENV, "write:tasks:raise")
    with pytest.raises(WriteError, match="failed and was rolled back") as failure:
        table.write(str(src))
    monkeypatch.delenv(FAULT_ENV)
    failed = failure.value.args[0].split()[1]   # "write <instant> failed ..."
    assert not Timeline.load(path).is_completed(failed)
    # The failed writer had appended to the committed logs (as Java does) and died mid-block: one tail keeps its
    # header (instant `failed`, never committed), the other is cut right after the MAGIC.
    first, second = _logs(path)[:2]
    (info,) = scan_log_file(second).blocks
    block = Path(second).read_bytes()[info.offset:info.end_offset].replace(info.instant_time.encode(), failed.encode(), 1)
    with open(second, "ab") as fh:
        fh.write(block[:-10])
    with open(first, "ab") as fh:
        fh.write(b"#HUDI#\x00\x00\x00")
    rows, warned = _quiet(read_arrow, path)
    assert not warned and _keys(rows) == ["a1", "a2", "b1", "b2"]
    shown = table.describe()
    logs = [lf for g in shown.file_groups for s in g.slices for lf in s.log_files]
    assert (shown.corrupt_log_blocks, sum(lf.torn_blocks for lf in logs)) == (0, 2)
    assert table.metrics().corrupt_log_blocks == 0
    plan = table.schedule_compaction(strategy="unbounded")
    table.run_compaction()
    assert Timeline.load(path).is_completed(plan.instant)
    after, warned = _quiet(read_arrow, path)
    assert not warned and after.sort_by("id").select(["id", "seq", "ts"]) == rows.sort_by("id").select(["id", "seq", "ts"])
    assert rows_by_key(after) == rows_by_key(hudi_read(path))


def test_damage_outside_a_time_travel_or_incremental_window_hides_nothing(spark, tmp_path):
    """Time travel before the damaged write, or an incremental range that ends before it, reads none of its
    blocks: no warning, and a full read into a file does not stop."""
    table = _days_table(tmp_path)
    logs = _logs(table.path)
    _flip(logs[2], RECORD_COUNT)   # day 3's write, seen by the content-prefix check at planning
    day1, day2, _ = [i.instant for i in table.timeline()]
    rows, seen = _quiet(table.read, "time_travel", as_of=day2)
    assert _keys(rows.table) == ["a1", "a2", "b1", "b2"] and seen == []
    rows, seen = _quiet(table.read, "incremental", begin=day1, end=day2)
    assert _keys(rows.table) == ["a2", "b2"] and seen == []
    out = tmp_path / "then.parquet"
    assert table.read("time_travel", as_of=day2, output=str(out), local=True).rows == 4
    with pytest.warns(CorruptLogBlockWarning, match=os.path.basename(logs[2])):
        table.read()   # the current snapshot does read it


def test_rolling_back_a_write_never_deletes_a_damaged_log_of_another(tmp_path):
    """A log-only group whose other log is damaged is not "created by" the write rolled back: its blocks
    are masked, and the damaged log (a committed write's records) stays for repair."""
    table = _days_table(tmp_path, days=2)
    first, second = _logs(table.path)
    original = Path(first).read_bytes()
    Path(first).write_bytes(original[:-10])   # truncated: its only block fails the framing checks
    assert scan_log_file(first).blocks == [] and scan_log_file(first).corrupt
    table.rollback([i.instant for i in table.timeline()][-1])
    assert os.path.exists(first)
    Path(first).write_bytes(original)   # repaired: the first write's records are all back
    assert _keys(table.read().table) == ["a1", "b1"]


# ------------------------------------------------ committed extents: a damaged header is not a torn tail

def _one_bucket(tmp_path) -> str:
    from tests.support.table_model import new_table

    path = str(tmp_path / "t")
    new_table(path, history=[], buckets=1)
    return path


def _damage_magic(log: str) -> bytes:
    """Overwrite the first block's MAGIC `#HUDI#` with `#XUDI#` (the issue's damage); returns the original bytes."""
    original = Path(log).read_bytes()
    assert original[:6] == b"#HUDI#"
    Path(log).write_bytes(b"#XUDI#" + original[6:])
    return original


def _ids(rows: pa.Table) -> list[str]:
    return sorted(rows.column("id").to_pylist())


def test_a_damaged_header_inside_the_committed_extent_is_a_corrupt_committed_block(tmp_path):
    """Issue 12 case 1, exactly: one bucket, 3 rows (one log block), the first bytes overwritten. The header is
    gone, nothing follows the region — what a torn tail looks like — but the write stat of the completed instant
    says these bytes are committed: reported, counted, never folded, and repairing the bytes brings every row
    back. hudi 0.5.0 does not skip it either: it fails on the magic."""
    from tests.support.table_model import E, write

    path = _one_bucket(tmp_path)
    w1 = write(path, "upsert", [(0, E), (1, E + 1), (2, E + 2)])
    (log,) = _logs(path)
    (stat,) = [s for i in Timeline.load(path).completed() for s in Timeline.load(path).commit_metadata(i).write_stats]
    assert stat.committed_extent == (0, os.path.getsize(log))
    original = _damage_magic(log)
    with pytest.raises(Exception, match="Invalid magic"):
        hudi_read(path)
    rows, warned = _quiet(read_arrow, path)
    assert rows.num_rows == 0 and len(warned) == 1
    assert f"{os.path.basename(log)} at offset 0 (instant {w1})" in str(warned[0].message)
    with pytest.raises(CorruptLogBlockError, match=f"{os.path.basename(log)} at offset 0"):
        read_arrow(path, fail_on_corrupt=True)
    table = Table.open(path)
    assert table.describe().corrupt_log_blocks == 1 and table.metrics().corrupt_log_blocks == 1
    with pytest.raises(CorruptLogBlockError, match="refusing to compact"):
        schedule_compaction(path, strategy="unbounded")
    assert Timeline.load(path).pending_compactions() == []
    assert table.clean(retain_commits=1).deleted == {}   # its slice is the latest: nothing of it goes
    Path(log).write_bytes(original)
    rows, warned = _quiet(read_arrow, path)
    assert not warned and _ids(rows) == ["k0", "k1", "k2"] and rows_by_key(rows) == rows_by_key(hudi_read(path))
    # A block begun past the committed extent is a torn tail (a failed append): skipped silently, as in Java.
    with open(log, "ab") as fh:
        fh.write(b"#HUDI#\x00\x00\x00")
    rows, warned = _quiet(read_arrow, path)
    assert not warned and _ids(rows) == ["k0", "k1", "k2"] and table.metrics().corrupt_log_blocks == 0


@pytest.mark.parametrize("mode", ["symlink", "copy"])
def test_a_damaged_header_of_a_carried_log_is_a_corrupt_committed_block(tmp_path, mode):
    """A carried link has its target's committed extent, a carried copy the extent of the log it copies."""
    from engine.compaction import run_compaction
    from tests.support.inline_spark import InlineSpark
    from tests.support.table_model import E, write

    path = _one_bucket(tmp_path)
    write(path, "upsert", [(0, E + 1000)])
    w2 = write(path, "upsert", [(1, E + 5000), (2, E + 5000)])
    schedule_compaction(path, threshold_ms=E + 2000, carry_over=mode)
    run_compaction(path, spark=InlineSpark())
    (carried,) = _logs(path)
    assert os.path.islink(carried) == (mode == "symlink")
    _damage_magic(os.path.realpath(carried))   # a link's damage is its target's; a copy's its own
    with pytest.raises(Exception, match="Invalid magic"):
        hudi_read(path)
    rows, warned = _quiet(read_arrow, path)
    assert _ids(rows) == ["k0"] and len(warned) == 1 and f"(instant {w2})" in str(warned[0].message)
    table = Table.open(path)
    assert table.describe().corrupt_log_blocks == 1 and table.metrics().corrupt_log_blocks == 1
    with pytest.raises(CorruptLogBlockError, match=f"refusing to compact.*{os.path.basename(carried)} at offset 0"):
        schedule_compaction(path, strategy="unbounded")


def test_a_plan_that_cannot_run_rolls_itself_back_and_never_wedges_the_table(tmp_path):
    """Issue 12 case 7: a block whose records are damaged passes planning (headers and prefixes) and fails the
    run; the run rolls its own plan back, so scheduling and cleaning go on, and the error names file and
    offset. Repaired, the block compacts like any other."""
    from engine.compaction import run_compaction
    from tests.support.inline_spark import InlineSpark
    from tests.support.table_model import E, write

    path = _one_bucket(tmp_path)
    write(path, "upsert", [(0, E + 1000)])
    write(path, "upsert", [(1, E + 2000)])
    log = _logs(path)[0]
    original = _flip(log, FIRST_RECORD)
    files = _listing(path)
    plan = schedule_compaction(path, strategy="unbounded")
    assert plan.written
    with pytest.raises(CorruptLogBlockError, match=f"compaction {plan.instant} failed.*{os.path.basename(log)} "
                                                   "at offset 0.*was rolled back, so the table can be scheduled"):
        run_compaction(path, spark=InlineSpark())
    timeline = Timeline.load(path)
    assert timeline.pending_compactions() == [] and not timeline.get(plan.instant)
    assert _listing(path) == files   # nothing written, nothing deleted, the damaged log untouched
    table = Table.open(path)
    table.clean(retain_commits=1)   # not refused by a pending plan
    again = schedule_compaction(path, strategy="unbounded")   # not refused either
    Path(log).write_bytes(original)   # repaired: the same kind of plan now runs
    run_compaction(path, spark=InlineSpark())
    assert Timeline.load(path).is_completed(again.instant)
    rows, warned = _quiet(read_arrow, path)
    assert not warned and _ids(rows) == ["k0", "k1"] and rows_by_key(rows) == rows_by_key(hudi_read(path))


def test_a_failed_plan_with_writes_in_its_slice_stays_and_says_why(tmp_path):
    """A write already went into slice C: rolling C back would orphan it, so the plan stays inflight and the
    error says so (and names the damage); repaired, the run completes with the write."""
    from engine.compaction import run_compaction
    from tests.support.inline_spark import InlineSpark
    from tests.support.table_model import E, write

    path = _one_bucket(tmp_path)
    write(path, "upsert", [(0, E + 1000)])
    log = _logs(path)[0]
    original = _flip(log, FIRST_RECORD)
    plan = schedule_compaction(path, strategy="unbounded")
    write(path, "upsert", [(1, E + 2000)])   # into slice C
    with pytest.raises(CorruptLogBlockError, match=f"{os.path.basename(log)} at offset 0.*Compaction {plan.instant} "
                                                   "stays inflight: it cannot be rolled back"):
        run_compaction(path, spark=InlineSpark())
    assert [i.timestamp for i in Timeline.load(path).pending_compactions()] == [plan.instant]
    Path(log).write_bytes(original)
    run_compaction(path, spark=InlineSpark())
    rows, warned = _quiet(read_arrow, path)
    assert not warned and _ids(rows) == ["k0", "k1"] and rows_by_key(rows) == rows_by_key(hudi_read(path))
