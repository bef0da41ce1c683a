"""Paths at the `Table` boundary: resolved once, against the caller's working directory, so executors (each
in its own folder on a cluster) and later calls agree on what a relative name meant."""
from __future__ import annotations

import os

import pytest

from engine import Table
from engine.datasource import load_table
from engine.errors import ConfigError
from engine.io.storage import absolute_location
from tests.support.s3_server import s3_env, s3_server  # noqa: F401  (fixtures)
from tests.support.tables import create_table, day_file


def test_relative_paths_resolve_against_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert absolute_location("t") == str(tmp_path / "t")
    assert absolute_location("./in/../batch.parquet") == str(tmp_path / "batch.parquet")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert absolute_location("~/t") == str(tmp_path / "home" / "t")


def test_uris_keep_their_scheme_and_file_uris_become_local_paths():
    assert absolute_location("s3://lake/prefix/t") == "s3://lake/prefix/t"
    assert absolute_location("gs://b/t") == "gs://b/t"
    assert absolute_location("file:///data/my%20table") == "/data/my table"
    assert absolute_location("file://localhost/data/t") == "/data/t"
    with pytest.raises(ConfigError, match="must name a local path"):
        absolute_location("file://otherhost/data/t")
    with pytest.raises(ConfigError, match="non-empty string"):
        absolute_location("")


def test_a_table_opened_or_created_by_a_relative_name_has_an_absolute_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    created = Table.create("t", name="t", record_keys=["id"], ordering_field="seq", event_time_field="ts")
    assert created.path == str(tmp_path / "t")
    os.chdir(tmp_path.parent)   # a later working directory must not change what the table is
    assert created.describe().path == str(tmp_path / "t")
    assert Table.open(f"file://{tmp_path}/t").path == str(tmp_path / "t")


def test_relative_inputs_and_outputs_resolve_before_spark_sees_them(spark, tmp_path, monkeypatch):
    table = create_table(tmp_path / "t")
    day_file(tmp_path, 0, "01")
    monkeypatch.chdir(tmp_path)
    assert table.write("batch0.jsonl").records_written == 3
    result = table.read(output="out/snapshot.parquet")
    assert result.output == str(tmp_path / "out" / "snapshot.parquet") and result.rows == 3
    assert os.path.isfile(tmp_path / "out" / "snapshot.parquet")
    # load_table resolves in this process; a bare spark.read.format("tidemark").load("t") resolves where the
    # driver JVM started, as Spark's own readers do (this test changed folders after that).
    assert load_table(spark, "t").count() == 3
    assert load_table(spark, "t", "read_optimized").count() == 0


def _nested_refusals(root: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    outer = Table.create(f"{root}/outer", name="outer", record_keys=["id"], ordering_field="seq",
                         event_time_field="ts")
    src = tmp_path / "rows.jsonl"
    src.write_text('{"id": "a", "seq": 1, "ts": "2024-01-01T00:00:00Z"}\n')
    outer.write(str(src))
    # a table inside another's folders: its files would be the outer table's to every reader and compaction
    with pytest.raises(ConfigError, match=f"inside the Hudi table at {outer.path}"):
        Table.create(f"{outer.path}/p=1/inner", name="inner", record_keys=["id"], ordering_field="seq",
                     event_time_field="ts")
    # a query result inside a table: a base file to readers, or the table's own properties
    for target in (f"{outer.path}/export.parquet", f"{outer.path}/.hoodie/hoodie.properties"):
        with pytest.raises(ConfigError, match="inside the Hudi table"):
            outer.read(output=target)
    assert outer.read().rows == 1
    assert outer.read(output=f"{root}/export.parquet").rows == 1   # beside the table: fine


def test_no_table_or_query_result_is_written_inside_a_table(tmp_path):
    _nested_refusals(str(tmp_path), tmp_path)


def test_no_table_or_query_result_is_written_inside_a_table_on_s3(s3_env, tmp_path):  # noqa: F811
    _nested_refusals(f"{s3_env['bucket_uri']}/nest", tmp_path)


def test_a_gcs_location_gives_up_in_seconds_not_minutes():
    """pyarrow retries GCS requests for 15 minutes by default: without Google credentials every command would
    seem to hang before saying so. Keys are names, as on S3."""
    from engine.io import storage

    fs, inside = storage.filesystem("gs://bucket/t/p=C#/f.parquet")
    assert inside == "bucket/t/p=C#/f.parquet"
    assert fs.__reduce__()[1][0]["retry_time_limit"].total_seconds() == storage.GCS_RETRY_S <= 30


def test_a_level_the_credentials_cannot_read_is_not_a_table(s3_env, monkeypatch):  # noqa: F811
    """With a policy scoped to a prefix, S3 answers 403 for `.hoodie/hoodie.properties` at the bucket's root: that
    level is no table as far as this user can tell, and creating one under the prefix goes on."""
    from engine.config.discovery import enclosing_table
    from engine.io import storage

    exists = storage.file_exists
    root = f"{s3_env['bucket_uri']}/.hoodie/hoodie.properties"

    def forbidden_at_the_root(path: str) -> bool:
        if path == root:
            raise OSError(f"{path}: 403")
        return exists(path)

    monkeypatch.setattr(storage, "file_exists", forbidden_at_the_root)
    assert enclosing_table(f"{s3_env['bucket_uri']}/team/t") is None
    assert Table.create(f"{s3_env['bucket_uri']}/team/t", name="t", record_keys=["id"], ordering_field="seq",
                        event_time_field="ts").name == "t"
