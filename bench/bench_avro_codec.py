"""Avro data-block codec: vectorized engine.logformat.avro_codec vs fastavro per-record, side by side.

Run: python -m bench.bench_avro_codec [--records N] [--repeat R]
Prints one JSON line with records/s for each path and the speed-up ratios.
"""

from __future__ import annotations

import argparse
import io
import json
import struct
import time
from collections.abc import Callable

import fastavro
import numpy as np
import pyarrow as pa

from engine.logformat.avro_codec import decode_data_block_content, encode_data_block_content
from engine.logformat.avro_schema_map import arrow_to_avro_schema


def make_table(n: int, seed: int = 42) -> pa.Table:
    """The bench schema (bench/common.py): 5 _hoodie_* strings + id, region, seq, event_time, amount, note."""
    rng = np.random.default_rng(seed)
    instant = "20250331030645735"
    ids = [f"{a:08x}-{b:04x}-4{c:03x}-8{d:03x}-{e:012x}" for a, b, c, d, e in zip(
        rng.integers(0, 2**32, n).tolist(), rng.integers(0, 2**16, n).tolist(), rng.integers(0, 2**12, n).tolist(),
        rng.integers(0, 2**12, n).tolist(), rng.integers(0, 2**48, n).tolist())]
    regions = np.array(["us-east", "us-west", "eu-central", "ap-south", "sa-east"])[rng.integers(0, 5, n)].tolist()
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz      ", dtype="S1")
    note_bytes = letters[rng.integers(0, len(letters), (n, 16))].view("S16").ravel()
    return pa.table({
        "_hoodie_commit_time": pa.array([instant] * n),
        "_hoodie_commit_seqno": pa.array([f"{instant}_0_{i}" for i in range(n)]),
        "_hoodie_record_key": pa.array(ids),
        "_hoodie_partition_path": pa.array([f"region={r}" for r in regions]),
        "_hoodie_file_name": pa.array(["d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0"] * n),
        "id": pa.array(ids),
        "region": pa.array(regions),
        "seq": pa.array(np.arange(n, dtype=np.int64) * 7 - 1000),
        "event_time": pa.array(1_743_390_405_000 + rng.integers(0, 10**9, n), pa.timestamp("ms", tz="UTC")),
        "amount": pa.array(np.round(rng.random(n) * 1000, 2)),
        "note": pa.array(note_bytes.astype(str).tolist()),
    })


def fastavro_encode(rows: list[dict], parsed: dict) -> bytes:
    out = io.BytesIO()
    out.write(struct.pack(">ii", 3, len(rows)))
    datum = io.BytesIO()
    pack, write = struct.Struct(">i").pack, fastavro.schemaless_writer
    for row in rows:
        datum.seek(0)
        datum.truncate()
        write(datum, parsed, row)
        out.write(pack(datum.tell()))
        out.write(datum.getbuffer())
    return out.getvalue()


def fastavro_decode(content: bytes, parsed: dict) -> list[dict]:
    stream = io.BytesIO(content)
    _, count = struct.unpack(">ii", stream.read(8))
    read, rows = fastavro.schemaless_reader, []
    for _ in range(count):
        stream.read(4)  # the record length: schemaless_reader consumes exactly the datum
        rows.append(read(stream, parsed, None))
    return rows


def best_of(repeat: int, fn: Callable[[], object]) -> tuple[float, object]:
    """Minimum wall time over `repeat` runs (the VM is noisy)."""
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3, help="runs of the vectorized codec (fastavro runs once)")
    args = parser.parse_args()
    pa.set_cpu_count(1)  # one core, as in the anchor numbers
    pa.set_io_thread_count(1)

    table = make_table(args.records)
    avro = arrow_to_avro_schema(table.schema, "bench_record", "hoodie.bench")
    parsed = fastavro.parse_schema(avro)
    n = table.num_rows

    enc_s, content = best_of(args.repeat, lambda: encode_data_block_content(table, avro))
    dec_s, decoded = best_of(args.repeat, lambda: decode_data_block_content(content, avro))
    assert decoded.equals(table), "vectorized round trip changed the data"

    rows = table.cast(pa.schema([pa.field(f.name, pa.int64() if pa.types.is_timestamp(f.type) else f.type)
                                 for f in table.schema])).to_pylist()
    fa_enc_s, fa_content = best_of(1, lambda: fastavro_encode(rows, parsed))
    fa_dec_s, fa_rows = best_of(1, lambda: fastavro_decode(content, parsed))
    assert fa_content == content, "vectorized encoding is not byte-identical to fastavro"
    assert len(fa_rows) == n

    print(json.dumps({
        "bench": "avro_codec",
        "records": n,
        "content_bytes": len(content),
        "ours_encode_rec_s": round(n / enc_s),
        "ours_decode_rec_s": round(n / dec_s),
        "fastavro_encode_rec_s": round(n / fa_enc_s),
        "fastavro_decode_rec_s": round(n / fa_dec_s),
        "encode_ratio": round(fa_enc_s / enc_s, 2),
        "decode_ratio": round(fa_dec_s / dec_s, 2),
        "byte_identical": True,
    }))


if __name__ == "__main__":
    main()
