"""engine.index.bucket_hash must agree with Spark's hash()/pmod() on every key, or the pure-pyarrow write
path and the Spark path would route the same record to different bucket file groups."""
from __future__ import annotations

import random
import struct

import numpy as np
import pyarrow as pa
import pytest

from engine.index import bucket_hash
from engine.index.bucket_hash import bucket_ids, spark_hash_strings

NUM_BUCKETS = (1, 4, 7, 256)
_ASCII = [chr(c) for c in range(32, 127)]
# Two-, three- and four-byte UTF-8 so tail bytes >= 0x80 (negative when sign-extended) are common.
_UNICODE = list("éèüñçøßÅ") + list("日本語漢字中文한국어") + ["😀", "🚀", "🌊", "👍🏽", "\u200d"]


def _random_key(rng: random.Random) -> str | None:
    kind = rng.random()
    if kind < 0.03:
        return None
    if kind < 0.05:
        return ""
    if kind < 0.60:
        return "".join(rng.choices(_ASCII, k=rng.randint(0, 70)))
    if kind < 0.90:
        return "".join(rng.choices(_ASCII + _UNICODE, k=rng.randint(1, 30)))
    if kind < 0.98:
        return "".join(rng.choices(_ASCII + ["\x00"], k=rng.randint(1, 20)))
    return "".join(rng.choices(_ASCII + _UNICODE, k=rng.randint(71, 600)))


@pytest.fixture(scope="module")
def keys() -> list[str | None]:
    rng = random.Random(20240611)
    fixed = ["", "\x00", "\x00\x00\x00\x00\x00", "a", "ab", "abc", "abcd", "abcde", "é", "日", "😀", "x" * 5000]
    return fixed + [_random_key(rng) for _ in range(20_000)]


@pytest.fixture(scope="module")
def spark_results(keys) -> dict[str, list[int]]:
    """Spark's hash(s) and pmod(hash(s), n) for every key, in key order."""
    from pyspark.sql import functions as F

    from engine.spark import get_spark

    spark = get_spark(cores=1)
    df = spark.createDataFrame(list(enumerate(keys)), "id long, s string")
    cols = [F.hash("s").alias("h")] + [F.pmod(F.hash("s"), F.lit(n)).alias(f"b{n}") for n in NUM_BUCKETS]
    rows = df.select("id", *cols).orderBy("id").collect()
    assert [r["id"] for r in rows] == list(range(len(keys)))
    return {name: [r[name] for r in rows] for name in ["h"] + [f"b{n}" for n in NUM_BUCKETS]}


def reference_hash(value: str | None, seed: int = 42) -> int:
    """Per-row transcription of Spark's Murmur3_x86_32.hashUnsafeBytes (the legacy tail)."""
    if value is None:
        return seed
    data = value.encode("utf-8")

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF

    def mix(h: int, k: int) -> int:
        k = rotl((k * 0xCC9E2D51) & 0xFFFFFFFF, 15) * 0x1B873593 & 0xFFFFFFFF
        return (rotl(h ^ k, 13) * 5 + 0xE6546B64) & 0xFFFFFFFF

    h = seed & 0xFFFFFFFF
    aligned = len(data) - len(data) % 4
    for i in range(0, aligned, 4):
        h = mix(h, struct.unpack_from("<I", data, i)[0])
    for byte in data[aligned:]:
        h = mix(h, (byte - 256 if byte >= 128 else byte) & 0xFFFFFFFF)  # Java byte -> int sign-extends
    h ^= len(data)
    for shift, mult in ((16, 0x85EBCA6B), (13, 0xC2B2AE35)):
        h = ((h ^ (h >> shift)) * mult) & 0xFFFFFFFF
    h ^= h >> 16
    return h - (1 << 32) if h >= 1 << 31 else h


def test_hash_matches_spark(keys, spark_results):
    ours = spark_hash_strings(pa.array(keys, pa.string()))
    assert ours.dtype == np.int32
    assert ours.tolist() == spark_results["h"]


@pytest.mark.parametrize("n", NUM_BUCKETS)
def test_bucket_ids_match_spark_pmod(keys, spark_results, n):
    ours = bucket_ids(pa.array(keys, pa.string()), n)
    assert ours.dtype == np.int32
    assert ours.tolist() == spark_results[f"b{n}"]


def test_layouts_match_spark(keys, spark_results, monkeypatch):
    """large_string, chunked, sliced, dictionary and view layouts, and small row slices / block runs
    (so slicing and run splitting are exercised on this data) all give Spark's hashes."""
    monkeypatch.setattr(bucket_hash, "_CHUNK_ROWS", 997)  # many row slices, each with mixed lengths
    monkeypatch.setattr(bucket_hash, "_RUN_WORDS", 64)  # long keys' block runs split into pieces
    expected = spark_results["h"]
    large = pa.array(keys, pa.large_string())
    assert spark_hash_strings(large).tolist() == expected
    chunked = pa.chunked_array([pa.array(keys[:5000]), pa.array(keys[5000:5001]), pa.array(keys[5001:])])
    assert spark_hash_strings(chunked).tolist() == expected
    assert spark_hash_strings(pa.array(keys)[1234:]).tolist() == expected[1234:]
    assert spark_hash_strings(pa.array(keys).dictionary_encode()).tolist() == expected
    assert spark_hash_strings(pa.array(keys, pa.string_view())).tolist() == expected


def test_reference_matches_spark_and_vectorized(keys, spark_results):
    sample = random.Random(7).sample(range(len(keys)), 400)
    picked = [keys[i] for i in sample]
    ref = [reference_hash(k) for k in picked]
    assert ref == [spark_results["h"][i] for i in sample]
    assert spark_hash_strings(pa.array(picked)).tolist() == ref


def test_custom_seed_matches_reference():
    values = ["", "a", "abcd", "abcde", "日本語", None]
    assert spark_hash_strings(pa.array(values), seed=-7).tolist() == [reference_hash(v, -7) for v in values]


def test_null_slot_with_bytes_hashes_to_seed():
    # Arrow allows a null slot to span data bytes; Spark never sees them, so neither must we.
    offsets = pa.py_buffer(np.array([0, 3, 9, 9], dtype=np.int32).tobytes())
    validity = pa.py_buffer(np.packbits([1, 0, 1], bitorder="little").tobytes())
    arr = pa.StringArray.from_buffers(3, offsets, pa.py_buffer(b"abcgarbage"), validity)
    assert spark_hash_strings(arr).tolist() == [reference_hash("abc"), 42, reference_hash("")]


def test_edge_inputs():
    assert spark_hash_strings(pa.array([], pa.string())).shape == (0,)
    assert spark_hash_strings(pa.chunked_array([], pa.string())).shape == (0,)
    assert spark_hash_strings(pa.array([None, None], pa.string())).tolist() == [42, 42]
    assert bucket_ids(pa.array(["a", None]), 1).tolist() == [0, 0]
    with pytest.raises(ValueError):
        bucket_ids(pa.array(["a"]), 0)
    with pytest.raises(TypeError):
        spark_hash_strings(pa.array([1, 2]))
