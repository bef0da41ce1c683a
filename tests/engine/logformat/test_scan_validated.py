"""Header scans of S3 logs kept across operations (engine.logformat.scan): served only when the current
operation's listing gives the object the ETag the scan's bytes came from — so a log rewritten with other bytes of
the same size (damage appearing after planning) is scanned again and its damage found."""
from __future__ import annotations

import pyarrow as pa

from engine.io import storage
from engine.logformat import encode_data_block, scan_log_file, scan_log_files
from engine.logformat.avro_schema_map import arrow_to_avro_schema
from engine.logformat.scan import scan_log_bytes
from tests.support.s3_server import s3_env, s3_server  # noqa: F401  (fixtures)


def _log() -> bytes:
    table = pa.table({"_hoodie_record_key": [f"k{i}" for i in range(50)], "v": list(range(50))})
    schema = arrow_to_avro_schema(table.schema, "r", "hoodie.t")
    return b"".join(encode_data_block(table, schema, f"2025010100000000{i}") for i in range(2))


def _gets(server, path: str) -> int:  # type: ignore[no-untyped-def]
    return sum(1 for r in server.counts() if r["method"] == "GET" and path.endswith(r["path"].split("/", 2)[-1]))


def test_a_listed_unchanged_log_is_not_read_again(s3_env):  # noqa: F811
    path = f"{s3_env['bucket_uri']}/t/p/.f_1.log.1_0"
    data = _log()
    storage.write_bytes(path, data)
    server = s3_env["server"]
    with storage.operation_reads():   # planning: lists, then scans (one GET)
        storage.list_tree(f"{s3_env['bucket_uri']}/t")
        first = scan_log_files([(path, len(data))])[path]
    assert len(first.blocks) == 2 and not first.corrupt
    server.reset_counts()
    with storage.operation_reads():   # the run: its own listing validates the kept scan
        storage.list_tree(f"{s3_env['bucket_uri']}/t")
        assert scan_log_files([(path, len(data))])[path] is first
        assert scan_log_file(path, len(data)) is first
    assert _gets(server, path) == 0
    # without a listing of its own an operation scans again (nothing is trusted unvalidated)
    with storage.operation_reads():
        assert scan_log_file(path, len(data)).blocks == first.blocks
    assert scan_log_file(path, len(data)).blocks == first.blocks
    assert _gets(server, path) == 2


def test_a_log_rewritten_with_other_bytes_of_the_same_size_is_scanned_again(s3_env):  # noqa: F811
    path = f"{s3_env['bucket_uri']}/d/p/.f_1.log.1_0"
    data = _log()
    storage.write_bytes(path, data)
    with storage.operation_reads():
        storage.list_tree(f"{s3_env['bucket_uri']}/d")
        assert not scan_log_files([(path, len(data))])[path].corrupt
    damaged = bytearray(data)
    damaged[7] ^= 0xFF   # the first block's length: framing damage a header scan finds
    storage.write_bytes(path, bytes(damaged))
    with storage.operation_reads():
        storage.list_tree(f"{s3_env['bucket_uri']}/d")
        assert scan_log_files([(path, len(data))])[path].corrupt


def test_a_scan_of_an_object_replaced_by_a_longer_one_after_the_listing_is_not_kept(s3_env):  # noqa: F811
    """The listing said one size; the object read was another (replaced in between): the scan covered only the
    listed bytes of it, so the new object's ETag must not vouch for it in the next operation."""
    path = f"{s3_env['bucket_uri']}/t/p/.f_1.log.1_0"
    data = _log()
    one_block = data[:len(data) // 2]
    assert len(scan_log_bytes(path, one_block).blocks) == 1
    storage.write_bytes(path, one_block)
    bucket, key = path[len("s3://"):].split("/", 1)
    with storage.operation_reads():
        storage.list_tree(f"{s3_env['bucket_uri']}/t")
        # another process replaces it, longer, before the scan
        s3_env["server"].client().put_object(Bucket=bucket, Key=key, Body=data)
        assert len(scan_log_files([(path, len(one_block))])[path].blocks) == 1
    with storage.operation_reads():   # the next operation lists the new object: both blocks, not the kept scan
        storage.list_tree(f"{s3_env['bucket_uri']}/t")
        assert len(scan_log_file(path, len(data)).blocks) == 2
