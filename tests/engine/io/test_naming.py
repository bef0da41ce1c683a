"""File/instant naming: parsing every file name in the Java fixtures, and generating names Java accepts."""

from __future__ import annotations

import datetime as dt
import os
import re
import zipfile

import pytest

from engine.compaction.plan import _threshold
from engine.io import naming
from engine.io.naming import (
    BaseFileName,
    LogFileName,
    bucket_of_file_id,
    instant_to_millis,
    millis_to_instant,
    new_file_id,
    new_instant_time,
    parse_base_file_name,
    parse_log_file_name,
    write_token,
)
from tests.support.fixtures import fixture_zips


def _fixture_file_names() -> list[str]:
    names: list[str] = []
    for z in fixture_zips().values():
        with zipfile.ZipFile(z) as zf:
            for info in zf.infolist():
                # gold_*/ hold Spark's expected results beside a table, not Hudi files
                if info.is_dir() or info.filename.startswith("__MACOSX") or "gold_" in info.filename:
                    continue
                names.append(os.path.basename(info.filename))
    return names


ALL_NAMES = _fixture_file_names()   # fetched at collection: the sdist is cached after the first run


def test_fixtures_present() -> None:
    assert len(fixture_zips()) == 73   # the tables of hudi 0.5.0's sdist
    assert len(ALL_NAMES) > 200


def test_every_fixture_file_name_classifies_and_round_trips() -> None:
    n_base = n_log = 0
    for name in ALL_NAMES:
        base, log = parse_base_file_name(name), parse_log_file_name(name)
        assert not (base and log), name
        if name.endswith((".parquet", ".hfile", ".lance")):
            assert base is not None, name
            assert base.name == name
            assert naming.is_instant(base.instant)
            assert re.fullmatch(r"\d+-\d+-\d+", base.write_token)
            n_base += 1
        elif ".log." in name and not name.endswith(".crc"):   # Hadoop checksum files are neither
            assert log is not None, name
            assert log.name == name
            assert log.version >= 1 and naming.is_instant(log.base_instant)
            n_log += 1
        else:
            assert base is None and log is None, name
    assert n_base >= 19 and n_log >= 60


def test_parse_known_examples() -> None:
    b = parse_base_file_name("d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0_0-13-60_20250331030642808.parquet")
    assert b == BaseFileName("d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0", "0-13-60", "20250331030642808", ".parquet")
    lg = parse_log_file_name(".d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0_20250331030642808.log.1_0-26-85")
    assert lg == LogFileName("d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0", "20250331030642808", 1, "0-26-85")
    assert parse_log_file_name(".abc-0_20250101000000000.log.12_1-0-1").version == 12


@pytest.mark.parametrize(
    "name",
    [
        ".hoodie_partition_metadata",
        "20250331030642808.deltacommit",
        "hoodie.properties",
        ".abc-0_20250101000000000.archive.1_0-0-0",  # archived timeline, not a data log
        ".abc-0_20250101000000000.log.1_0-0-0.cdc",  # CDC log
        ".abc-0_20250101000000000.log.1_0-0-0.tmp",
        "abc-0_0-1-2_20250101000000000.parquet.crc",
        "abc-0_0-1-2_2025.parquet",
        ".abc-0_0-1-2_20250101000000000.parquet",
    ],
)
def test_non_matching_names(name: str) -> None:
    assert parse_log_file_name(name) is None
    assert parse_base_file_name(name) is None


def test_new_file_id_shape() -> None:
    fid = new_file_id()
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}-0", fid)
    assert "_" not in fid
    assert new_file_id() != fid


def test_bucket_file_id() -> None:
    fid = new_file_id(bucket=42)
    assert fid.startswith("00000042-") and fid.endswith("-0") and "_" not in fid
    assert len(fid) == len(new_file_id())
    assert bucket_of_file_id(fid) == 42
    assert bucket_of_file_id(new_file_id(bucket=0)) == 0
    assert bucket_of_file_id("d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0") is None
    with pytest.raises(ValueError):
        new_file_id(bucket=-1)


def test_generated_names_parse_back() -> None:
    fid, tok, inst = new_file_id(), write_token(3, 14, 15), new_instant_time()
    assert tok == "3-14-15"
    base = BaseFileName(fid, tok, inst)
    assert parse_base_file_name(base.name) == base
    log = LogFileName(fid, inst, 2, tok)
    assert log.name == f".{fid}_{inst}.log.2_{tok}"
    assert parse_log_file_name(log.name) == log


def test_instant_millis_round_trip() -> None:
    assert instant_to_millis("19700101000000001") == 1
    assert instant_to_millis("20250331030642808") == 1743390402808
    assert millis_to_instant(1743390402808) == "20250331030642808"
    assert instant_to_millis("20250331030642") == 1743390402000  # 14 digits = seconds
    with pytest.raises(ValueError):
        instant_to_millis("2025")


def test_new_instant_time_monotonic_and_after() -> None:
    seen = [new_instant_time() for _ in range(200)]
    assert all(len(s) == 17 and s.isdigit() for s in seen)
    assert seen == sorted(seen) and len(set(seen)) == len(seen)
    future = millis_to_instant(instant_to_millis(seen[-1]) + 60_000)
    nxt = new_instant_time(after=future)
    assert nxt > future and instant_to_millis(nxt) == instant_to_millis(future) + 1
    assert new_instant_time(after="20991231235959") > "20991231235959"
    # A future `after` (one table's skewed timeline) never moves the process's clock: the next instant
    # without one is "now" again, still after every clock reading issued before.
    again = new_instant_time()
    assert seen[-1] < again < future


def test_a_table_with_a_future_instant_does_not_move_other_tables_latency_threshold(tmp_path) -> None:
    """A worker that wrote to a table whose timeline holds a 2099 instant then plans another table by data
    latency: the threshold is now minus the latency, not 2099 minus it (which would compact and publish
    data the latency setting keeps out)."""
    new_instant_time(after="20990101000000000")
    now_ms = int(dt.datetime.now(tz=dt.UTC).timestamp() * 1000)
    threshold = _threshold("event_time", new_instant_time(), None, 3_600_000)
    assert threshold is not None and threshold <= now_ms - 3_600_000 + 5_000
