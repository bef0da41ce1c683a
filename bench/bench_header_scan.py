"""Header-only scan vs full decode of log files.

    python -m bench.bench_header_scan [--files 2000] [--blocks 4] [--records 2500] [--keep DIR]

Writes N log files x B Avro blocks x R records into a temp dir, then times scan_log_file over all files (warm: run
twice, second run counted) against read_log_file over all files, and prints JSON with both times and their ratio.
One file's blocks are encoded once; the other files are byte copies with each block's INSTANT_TIME patched in place
(same length, so the framing stays valid).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from engine.logformat import encode_data_block, read_log_file, scan_log_file
from engine.logformat.avro_schema_map import arrow_to_avro_schema

BASE_INSTANT = 20250101000000000
T0_MS = 1_735_689_600_000  # 2025-01-01T00:00:00Z
INSTANT_OFFSET = 6 + 8 + 4 + 4 + 4 + 4 + 4  # MAGIC, blockLength, version, type, count, key 0, value length


def make_table(records: int, instant: str, block: int) -> pa.Table:
    keys = [f"id-{block:02d}-{i:07d}" for i in range(records)]
    return pa.table(
        {
            "_hoodie_commit_time": pa.array([instant] * records),
            "_hoodie_commit_seqno": pa.array([f"{instant}_0_{i}" for i in range(records)]),
            "_hoodie_record_key": pa.array(keys),
            "_hoodie_partition_path": pa.array(["region=eu"] * records),
            "_hoodie_file_name": pa.array(["5f0c2a9e-3b7d-4c1e-9a8f-2d6b4e1c7a90-0"] * records),
            "id": pa.array(keys),
            "region": pa.array(["eu"] * records),
            "seq": pa.array(range(records), pa.int64()),
            "event_time": pa.array([T0_MS + 1000 * (block * records + i) for i in range(records)], pa.timestamp("ms", tz="UTC")),
            "amount": pa.array([i * 0.37 for i in range(records)], pa.float64()),
            "note": pa.array([None if i % 5 == 0 else f"note for record {i}" for i in range(records)]),
        }
    )


def template_blocks(blocks: int, records: int) -> list[bytes]:
    """Encode one file's worth of Avro blocks, each carrying its event-time range in the SCHEMA header."""
    out = []
    for b in range(blocks):
        instant = str(BASE_INSTANT + b)
        table = make_table(records, instant, b)
        schema = arrow_to_avro_schema(table.schema, "bench_record", "hoodie.bench")
        times = table.column("event_time").cast(pa.int64())
        lo, hi = times[0].as_py(), times[-1].as_py()
        out.append(encode_data_block(table, schema, instant, min_event_time=lo, max_event_time=hi))
    return out


def with_instant(block: bytes, instant: str) -> bytes:
    """Same block with a different INSTANT_TIME header value (header key 0 is written first, 17 characters)."""
    key, length = struct.unpack_from(">ii", block, INSTANT_OFFSET - 8)
    assert key == 0 and length == len(instant) == 17
    return block[:INSTANT_OFFSET] + instant.encode() + block[INSTANT_OFFSET + length :]


def write_files(root: Path, files: int, blocks: list[bytes]) -> list[str]:
    paths = []
    for f in range(files):
        first = BASE_INSTANT + 1000 + f * len(blocks)
        data = b"".join(with_instant(blk, str(first + i)) for i, blk in enumerate(blocks))
        path = root / f".{f:08x}-0000-4000-8000-000000000000-0_{first}.log.1_0-0-0"
        path.write_bytes(data)
        paths.append(str(path))
    return paths


def time_it(fn, paths: list[str]) -> tuple[float, object]:
    start = time.perf_counter()
    result = [fn(p) for p in paths]
    return time.perf_counter() - start, result


def time_read(paths: list[str]) -> tuple[float, int]:
    """Full decode of every file; tables are dropped as we go so memory stays at one file's worth."""
    rows = 0
    start = time.perf_counter()
    for p in paths:
        rows += sum(b.records.num_rows for b in read_log_file(p).blocks)
    return time.perf_counter() - start, rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--blocks", type=int, default=4)
    ap.add_argument("--records", type=int, default=2500)
    ap.add_argument("--keep", help="write into this directory and keep it")
    args = ap.parse_args()

    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="tidemark-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        t = time.perf_counter()
        paths = write_files(root, args.files, template_blocks(args.blocks, args.records))
        setup_s = time.perf_counter() - t
        total_bytes = sum(os.path.getsize(p) for p in paths)

        time_it(scan_log_file, paths)  # warm-up: page cache, imports
        scan_s, scans = time_it(scan_log_file, paths)
        blocks_seen = sum(len(s.blocks) for s in scans)
        assert blocks_seen == args.files * args.blocks and not any(s.corrupt for s in scans)
        assert all(b.min_event_time is not None for s in scans for b in s.blocks)
        read_s, rows = time_read(paths)
        assert rows == args.files * args.blocks * args.records
        print(
            json.dumps(
                {
                    "files": args.files,
                    "blocks_per_file": args.blocks,
                    "records_per_block": args.records,
                    "total_mb": round(total_bytes / 2**20, 1),
                    "setup_s": round(setup_s, 2),
                    "scan_s": round(scan_s, 4),
                    "scan_us_per_block": round(scan_s / blocks_seen * 1e6, 2),
                    "read_s": round(read_s, 2),
                    "read_records_per_s": round(rows / read_s),
                    "ratio": round(read_s / scan_s, 1),
                },
                indent=2,
            )
        )
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
