"""`engine.write.inputs`: input files and rows checked against the table before a write opens its instant."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.config.layout import create_table
from engine.config.properties import load_table_config
from engine.errors import InputError
from engine.write import inputs


@pytest.fixture
def cfg(tmp_path):
    create_table(str(tmp_path / "t"), name="t", record_keys=["id", "sub"], partition_fields=["region"],
                 ordering_field="seq", event_time_field="ts")
    return load_table_config(str(tmp_path / "t"))


def test_locate_names_missing_empty_and_unsupported_inputs(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        inputs.locate(str(tmp_path / "none.csv"))
    (tmp_path / "e.jsonl").write_bytes(b"")
    with pytest.raises(InputError, match="e.jsonl is empty"):
        inputs.locate(str(tmp_path / "e.jsonl"))
    (tmp_path / "x.txt").write_text("id\n")
    with pytest.raises(InputError, match="unsupported input"):
        inputs.locate(str(tmp_path / "x.txt"))
    (tmp_path / "dir").mkdir()
    with pytest.raises(InputError, match="no .parquet files"):
        inputs.locate(str(tmp_path / "dir"))


def test_text_inputs_read_with_naive_times_as_utc(tmp_path):
    (tmp_path / "a.csv").write_text("id,ts\nk,2024-01-01T00:00:00\n")
    table = inputs.read_text(inputs.locate(str(tmp_path / "a.csv")))
    assert table.schema.field("ts").type.tz == "UTC"
    (tmp_path / "b.jsonl").write_text('{"id": 1,\n')
    with pytest.raises(InputError, match="cannot read .*b.jsonl as JSONL"):
        inputs.read_text(inputs.locate(str(tmp_path / "b.jsonl")))


def test_parquet_inputs_need_rows_and_one_schema(tmp_path):
    pq.write_table(pa.table({"id": pa.array([], pa.string())}), tmp_path / "empty.parquet")
    with pytest.raises(InputError, match="has no rows"):
        inputs.parquet_schema((str(tmp_path / "empty.parquet"),))
    pq.write_table(pa.table({"id": ["a"]}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"id": [1]}), tmp_path / "b.parquet")
    with pytest.raises(InputError, match="disagree on their schema"):
        inputs.parquet_schema((str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")))


def test_composite_keys_refuse_only_all_blank(cfg):
    ok = pa.table({"id": ["a", ""], "sub": [None, "x"]})
    inputs.check_keys(cfg, ok, "in")
    with pytest.raises(InputError, match=r"row 1 has an empty record key \(fields id='', sub=''\)"):
        inputs.check_keys(cfg, pa.table({"id": ["a", ""], "sub": ["b", ""]}), "in")
    with pytest.raises(InputError, match="row 0 has a null record key"):
        inputs.check_keys(cfg, pa.table({"id": pa.array([None], pa.string()), "sub": pa.array([None], pa.string())}),
                          "in")


def test_columns_required_by_operation_and_unknown_delete_columns(cfg):
    current = pa.schema([("id", pa.string()), ("sub", pa.string()), ("region", pa.string()),
                         ("seq", pa.int64()), ("ts", pa.timestamp("us", tz="UTC"))])
    with pytest.raises(InputError, match="lacks column\\(s\\) seq, ts"):
        inputs.check_columns(cfg, current, ["id", "sub", "region"], "upsert", "in")
    inputs.check_columns(cfg, current, ["id", "sub", "region", "seq", "_hoodie_commit_time"], "delete", "in")
    with pytest.raises(InputError, match="colour"):
        inputs.check_columns(cfg, current, ["id", "sub", "region", "colour"], "delete", "in")
    inputs.check_columns(cfg, current, ["id", "sub", "region", "seq", "ts", "colour"], "upsert", "in")


def test_types_that_never_convert_are_refused_without_values():
    current = pa.schema([("ts", pa.timestamp("us", tz="UTC")), ("seq", pa.int64())])
    inputs.check_types(current, pa.schema([("ts", pa.string()), ("seq", pa.int32())]), "df")
    with pytest.raises(InputError, match="df: column 'ts' is a timestamp in the table"):
        inputs.check_types(current, pa.schema([("ts", pa.int64())]), "df")
