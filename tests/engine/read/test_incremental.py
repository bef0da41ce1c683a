"""Time travel and incremental queries (engine/read/incremental.py, engine/read/window.py) over a table whose
partial event-time compaction carried logs over (links, copies, and in exact mode a carry-forward log):
every instant's time travel and every incremental range equal the model and hudi 0.5.0, with no key twice;
consecutive ranges never return one version twice; the Spark data source and the CLI return the same rows;
bad instants and ranges (and instants whose slices any clean deleted, whatever its policy) are refused before
anything is written; a dangling carried-over link in a group replaced later fails time travel before the
replacecommit; a late update losing to a compacted base row follows hudi 0.5.0."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import Table
from engine.cli import main
from engine.errors import ConfigError, TidemarkError
from engine.read.query import QuerySpec, plan_read, read_arrow
from engine.slices.fsview import FileSystemView
from engine.timeline.instants import Timeline
from tests.support.history_tables import History, build_history, model_as_of, model_changes, versions
from tests.support.oracle import hudi_read
from tests.support.tables import THRESHOLD, day_file, three_day_table

MODES = {"symlink": ("symlink", False), "copy": ("copy", False), "exact": ("symlink", True)}


@pytest.fixture(scope="module", params=list(MODES))
def history(request, spark_session, tmp_path_factory) -> History:
    carry_over, exact = MODES[request.param]
    return build_history(tmp_path_factory.mktemp(request.param), carry_over, exact)


def ours(history: History, query: str, **instants: str | None) -> dict[str, dict]:
    return versions(read_arrow(history.table.path, QuerySpec(query, **instants)).to_pylist())


def theirs(history: History, query: str, **instants: str | None) -> dict[str, dict]:
    return versions(hudi_read(history.table.path, query, **instants).to_pylist())


def ranges(history: History) -> list[tuple[str | None, str]]:
    starts: list[str | None] = [None, *history.instants]
    return [(b, e) for b in starts for e in history.instants if b is None or b < e]


def test_the_compaction_carried_logs_over(history):
    """The fixture exercises the point: C's commit records carried links or copies, which sit in slice C, and
    in exact mode C also wrote a carry-forward log (version 1 of slice C)."""
    meta = Timeline.load(history.table.path).commit_metadata(
        next(i for i in Timeline.load(history.table.path).completed() if i.timestamp == history.compaction))
    carried = meta.carried or []
    assert carried and {c.mode for c in carried} == {history.carry_over}
    view = FileSystemView(history.table.path)
    c_logs = {lf.name: lf.path for g in view.file_groups() for s in g.slices if s.base_instant == history.compaction
              for lf in s.log_files}
    for entry in carried:
        assert os.path.islink(c_logs[entry.symlink]) == (entry.mode == "symlink")
    spills = [n for n in c_logs if f"_{history.compaction}.log.1_" in n]
    assert bool(spills) == history.exact == meta.settings.exact


def test_time_travel_to_every_instant_is_the_model_and_hudi(history):
    for instant in history.instants:
        got = ours(history, "time_travel", as_of=instant)
        assert got == model_as_of(history, instant), instant
        assert got == theirs(history, "time_travel", as_of=instant), instant


def test_time_travel_before_the_compaction_reads_no_file_of_its_slice(history):
    """As of an instant before C, slice C (its base, its carried logs) is invisible: the originals are read."""
    before = history.instants[history.instants.index(history.compaction) - 1]
    plan = plan_read(history.table.path, QuerySpec("time_travel", as_of=before))
    files = [p for ref in plan.slices for p in (ref.base_path, *ref.log_paths) if p]
    assert files and not any(f"_{history.compaction}" in os.path.basename(p) for p in files)


def test_every_incremental_range_is_the_model_and_hudi(history):
    for begin, end in ranges(history):
        got = ours(history, "incremental", begin=begin, end=end)
        assert got == model_changes(history, begin, end), (begin, end)
        assert got == theirs(history, "incremental", begin=begin, end=end), (begin, end)


def test_consecutive_ranges_return_each_version_once(history):
    """Pulling (i0, i1], (i1, i2], ... returns every version once: carried-over logs and the compaction's base
    (records keep their commit times) add nothing, and the carried records still come exactly once."""
    seen: dict[tuple[str, str], str] = {}
    begin = None
    for end in history.instants:
        for key, row in ours(history, "incremental", begin=begin, end=end).items():
            version = (key, row["_hoodie_commit_time"])
            assert version not in seen, f"{version} returned by ranges ending {seen.get(version)} and {end}"
            seen[version] = end
        begin = end
    carried = next(s for s in history.steps if s.keys == ["k1", "k2", "k6"])   # W2: the carried-over log
    assert {(k, carried.instant) for k in carried.keys} <= set(seen)


def test_compaction_alone_is_no_change(history):
    c = history.compaction
    before = history.instants[history.instants.index(c) - 1]
    assert ours(history, "incremental", begin=before, end=c) == {}


def test_the_data_source_returns_the_same_rows(history, spark_session):
    path = history.table.path
    c = history.compaction
    begin, end = history.instants[1], history.instants[-2]        # spans the compaction
    df = (spark_session.read.format("tidemark").option("hoodie.datasource.query.type", "incremental")
          .option("hoodie.datasource.read.begin.instanttime", begin)
          .option("hoodie.datasource.read.end.instanttime", end).load(path))
    assert versions(df.toArrow().to_pylist()) == ours(history, "incremental", begin=begin, end=end)
    before = history.instants[history.instants.index(c) - 1]
    df = spark_session.read.format("tidemark").option("as.of.instant", before).load(path)
    assert versions(df.toArrow().to_pylist()) == model_as_of(history, before)
    df = spark_session.read.format("tidemark").option("query", "time_travel").option("as.of.instant", c).load(path)
    assert versions(df.toArrow().to_pylist()) == model_as_of(history, c)


def test_table_read_and_export_through_spark(history, tmp_path):
    begin, end = history.instants[0], history.compaction
    result = history.table.read("incremental", begin=begin, end=end, output=str(tmp_path / "o.parquet"))
    assert versions(pq.read_table(result.output).to_pylist()) == model_changes(history, begin, end)
    assert result.to_dict()["begin_instant"] == begin and result.rows == len(model_changes(history, begin, end))


# ------------------------------------------------------------------------------------------ refusals

@pytest.fixture(scope="module")
def small(spark_session, tmp_path_factory) -> tuple[Table, list[str]]:
    """Three writes, a rolled-back fourth, a pending compaction: instants of every kind to refuse."""
    tmp = tmp_path_factory.mktemp("refuse")
    table = three_day_table(tmp)
    writes = [i.instant for i in table.timeline() if i.action == "deltacommit"]
    rolled = table.write(day_file(tmp, 9, "03")).instant
    rollback = table.rollback(rolled).rollback_instant
    pending = table.schedule_compaction(threshold=THRESHOLD).instant
    assert pending is not None
    return table, [*writes, rolled, rollback, pending]


def refusal(small, **kwargs) -> str:
    table, _ = small
    with pytest.raises(ConfigError) as err:
        table.read(**kwargs)
    return str(err.value)


def test_bad_instants_and_ranges_are_refused(small):
    _, (w0, w1, w2, rolled, rollback, pending) = small
    assert "rolled back" in refusal(small, query="time_travel", as_of=rolled)
    assert "not completed" in refusal(small, query="time_travel", as_of=pending)
    assert "archived" in refusal(small, query="time_travel", as_of="20000101000000000")
    assert "empty" in refusal(small, query="incremental", begin=w1, end=w1)
    assert "empty" in refusal(small, query="incremental", begin=w2, end=w1)
    assert "not an instant" in refusal(small, query="time_travel", as_of="yesterday")
    assert "needs the as-of" in refusal(small, query="time_travel")
    assert "incremental" in refusal(small, query="snapshot", begin=w0)


def seqs(table: pa.Table) -> dict[str, int]:
    return {r["id"]: r["seq"] for r in table.to_pylist()}


def test_any_instant_time_bounds_an_incremental_range_as_in_hudi(small, tmp_path, capsys):
    """Issue 12 case 8: Hudi's idiom `--begin 000`, and begin/end times that are no instant (between instants,
    a rollback's, a pending compaction's, after the last): "commits after begin, up to end", as hudi 0.5.0."""
    table, (w0, w1, w2, rolled, rollback, pending) = small
    out = tmp_path / "o.parquet"
    assert main(["read", table.path, "--query", "incremental", "--begin", "000", "--output", str(out), "--local",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == 3
    assert seqs(pq.read_table(out)) == {"k0": 2, "k1": 2, "k2": 2} == seqs(hudi_read(table.path, "incremental",
                                                                                    begin="000"))
    between = (str(int(w0) + 1), str(int(w1) + 1))
    for begin, end, expected in ((between[0], between[1], 1), ("000", between[0], 0), (w1, rollback, 2),
                                 (w1, pending, 2), (w0, str(int(pending) + 1), 2), (rolled, str(int(pending) + 1), None)):
        got = seqs(table.read("incremental", begin=begin, end=end).table)
        assert got == ({} if expected is None else {f"k{k}": expected for k in range(3)}), (begin, end)
        assert got == seqs(hudi_read(table.path, "incremental", begin=begin, end=end)), (begin, end)


def test_an_incremental_range_reaching_into_archived_instants_is_refused(small, tmp_path):
    """Only a range that reaches before an active timeline whose older instants were archived is refused, and
    the refusal says so; a range starting on the active timeline still reads."""
    table, (w0, *_) = small
    path = str(tmp_path / "t")
    shutil.copytree(table.path, path, symlinks=True)
    archived = Path(path) / ".hoodie" / "archived"
    archived.mkdir(exist_ok=True)
    (archived / ".commits_.archive.1_1-0-1").write_bytes(b"#HUDI#")
    with pytest.raises(ConfigError, match="older instants were archived") as err:
        Table.open(path).read("incremental", begin="000")
    assert f"starts at {w0}" in str(err.value)
    assert seqs(Table.open(path).read("incremental", begin=w0).table) == {f"k{k}": 2 for k in range(3)}


def test_the_cli_reads_ranges_and_refuses_bad_ones_in_one_line(small, tmp_path, capsys):
    table, (w0, w1, w2, rolled, *_) = small
    out = tmp_path / "o.parquet"
    assert main(["read", table.path, "--query", "incremental", "--begin", w0, "--end", w2, "--output", str(out),
                 "--local", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["rows"] == pq.read_table(out).num_rows == 3 and data["end_instant"] == w2
    assert {r["seq"] for r in pq.read_table(out).to_pylist()} == {2}
    assert main(["read", table.path, "--query", "time_travel", "--as-of", w1, "--output", str(out), "--local"]) == 0
    assert "as of" in capsys.readouterr().err and {r["seq"] for r in pq.read_table(out).to_pylist()} == {1}
    bad = tmp_path / "bad.parquet"
    for argv in (["--query", "incremental", "--begin", w2, "--end", w0], ["--query", "time_travel", "--as-of", rolled]):
        assert main(["read", table.path, *argv, "--output", str(bad)]) == 1
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and not bad.exists() and not Path(str(bad) + ".tmp").exists()


def test_a_late_update_that_loses_to_the_base_follows_hudi(spark_session, tmp_path):
    """Ordering by event time: a late update after C loses to C's base row. Its range counts it as a change
    only when the base's compaction is outside the range (the base then is not merged) — hudi 0.5.0's rule."""
    table = Table.create(str(tmp_path / "t"), name="late", record_keys=["id"], ordering_field="ts",
                         event_time_field="ts", settings={"hoodie.bucket.index.num.buckets": "1"})

    def write(seq: int, rows: list[tuple[str, str]]) -> str:
        src = tmp_path / f"{seq}.jsonl"
        src.write_text("".join(json.dumps({"id": k, "ts": f"2024-01-{d}T06:00:00Z", "seq": seq}) + "\n"
                               for k, d in rows))
        return table.write(str(src)).instant

    w0 = write(0, [("a", "02"), ("b", "02")])
    plan = table.schedule_compaction(threshold=THRESHOLD)
    assert plan.instant is not None
    c = table.run_compaction(plan.instant).instant
    w1 = write(1, [("a", "01"), ("b", "03")])          # a: late and older than the base row; b: newer
    for begin, expected in ((c, {"a": 1, "b": 1}), (w0, {"b": 1})):
        got = read_arrow(table.path, QuerySpec("incremental", begin=begin, end=w1)).to_pylist()
        assert {r["id"]: r["seq"] for r in got} == expected, begin
        assert versions(got) == versions(hudi_read(table.path, "incremental", begin=begin, end=w1).to_pylist())
    assert {r["id"]: r["seq"] for r in read_arrow(table.path).to_pylist()} == {"a": 0, "b": 1}


def cleaned_copy(history: History, tmp_path: Path, **clean: int) -> tuple[Table, str]:
    """A copy of the history table cleaned once with `clean`'s retention; returns it and the clean instant."""
    path = str(tmp_path / "t")
    shutil.copytree(history.table.path, path, symlinks=True)   # carried-over logs stay relative links
    table = Table.open(path)
    result = table.clean(**clean)
    assert result.instant is not None and result.deleted
    return table, result.instant


@pytest.mark.parametrize("retention", [{"retain_commits": 1}, {"retain_versions": 1}])
def test_time_travel_to_an_instant_whose_slices_a_clean_deleted_is_refused(history, tmp_path, retention):
    """Whatever the clean's policy (KEEP_LATEST_FILE_VERSIONS names no earliest instant to retain), a read
    whose slices are gone is refused, naming the clean; every instant whose slices survive still reads the
    model and hudi 0.5.0. Both cleans delete the pre-compaction slices (bar link targets) and keep slice C."""
    table, clean = cleaned_copy(history, tmp_path, **retention)
    for instant in history.instants:
        if instant < history.compaction:
            with pytest.raises(ConfigError, match=f"clean {clean} deleted"):
                table.read("time_travel", as_of=instant)
            continue
        got = versions(table.read("time_travel", as_of=instant).table.to_pylist())
        assert got == model_as_of(history, instant), instant
        assert got == versions(hudi_read(table.path, "time_travel", as_of=instant).to_pylist()), instant
    first, before = history.instants[0], history.instants[history.instants.index(history.compaction) - 1]
    with pytest.raises(ConfigError, match=f"end instant {before} needs"):
        table.read("incremental", end=before)
    # (first, after C]: the groups it changed are read as of the end, from slices that survive.
    end = history.instants[-1]
    got = versions(table.read("incremental", begin=first, end=end).table.to_pylist())
    assert got == model_changes(history, first, end)
    assert got == versions(hudi_read(table.path, "incremental", begin=first, end=end).to_pylist())


def test_the_cli_refuses_time_travel_into_a_cleaned_slice_in_one_line(history, tmp_path, capsys):
    table, clean = cleaned_copy(history, tmp_path, retain_versions=1)
    out = tmp_path / "o.parquet"
    assert main(["read", table.path, "--query", "time_travel", "--as-of", history.instants[0],
                 "--output", str(out), "--local"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("tidemark: error:") and f"clean {clean}" in err
    assert not out.exists() and not Path(str(out) + ".tmp").exists()


def test_time_travel_before_a_replacecommit_whose_groups_a_clean_deleted_is_refused(spark_session, tmp_path):
    """KEEP_LATEST_FILE_VERSIONS deletes a replaced file group at once (as Java): reads as of an instant
    before the replacecommit needed it, so they are refused; as of the replacecommit the table is whole."""
    table = three_day_table(tmp_path)
    w2 = [i.instant for i in table.timeline() if i.action == "deltacommit"][-1]
    replace = table.write(day_file(tmp_path, 5, "04", keys=2), "insert_overwrite_table").instant
    assert len(table.read("time_travel", as_of=w2).table) == 3
    assert table.clean(retain_versions=1).deleted
    with pytest.raises(ConfigError, match="clean"):
        table.read("time_travel", as_of=w2)
    got = versions(table.read("time_travel", as_of=replace).table.to_pylist())
    assert len(got) == 2 and got == versions(hudi_read(table.path, "time_travel", as_of=replace).to_pylist())


def test_a_dangling_link_in_a_replaced_group_fails_time_travel_before_the_replacecommit(history, tmp_path):
    """Current reads leave a replaced group out, so its broken carried-over link loses nothing there; time
    travel before the replacecommit still reads the group, and refuses instead of dropping its records."""
    path = str(tmp_path / "t")
    shutil.copytree(history.table.path, path, symlinks=True)
    table = Table.open(path)
    links = [lf.path for g in FileSystemView(path).file_groups() for s in g.slices for lf in s.log_files
             if os.path.islink(lf.path)]
    if history.carry_over != "symlink":
        assert links == []   # byte copies: nothing can dangle
        return
    link = links[0]
    os.remove(os.path.join(os.path.dirname(link), os.readlink(link)))
    with pytest.raises(TidemarkError, match="missing target"):
        table.read()
    replace = table.write(day_file(tmp_path, 9, "05", keys=2), "insert_overwrite_table").instant
    assert len(table.read().table) == 2 == len(table.read("time_travel", as_of=replace).table)
    with pytest.raises(TidemarkError, match="missing target"):
        table.read("time_travel", as_of=history.instants[-1])
    with pytest.raises(TidemarkError, match="missing target"):
        table.read("incremental", begin=history.instants[0], end=history.instants[-1])
