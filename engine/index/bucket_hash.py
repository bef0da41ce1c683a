"""Spark-compatible bucket ids for string record keys, computed with numpy on pyarrow arrays.

Hudi's bucket index routes a record to ``pmod(hash(key), num_buckets)``, where ``hash`` is Spark's
``Murmur3Hash`` (seed 42). For a UTF-8 string Spark calls ``Murmur3_x86_32.hashUnsafeBytes`` — the
legacy variant, not ``hashUnsafeBytes2``: every tail byte after the last full 4-byte block is
sign-extended to an int and mixed in as a whole round (``mixK1`` then ``mixH1``), unlike reference
murmur3, which packs the tail into one partial word. Blocks are read with ``Platform.getInt``, i.e.
native byte order, which is little-endian on every platform Spark runs on. A null input leaves the
running hash untouched, so ``hash(null)`` is the seed.

Murmur3 is sequential within a row but independent across rows, so we vectorize across rows: the
block loop runs over block *positions* (at most ``max_len // 4`` steps per slice of rows), each step
processing every row that still has a block there. Within a slice, rows are ordered by block count
(descending) once, so the rows still active at step ``j`` are a prefix and each step works on
contiguous arrays instead of masks.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["spark_hash_strings", "bucket_ids", "buckets_of"]

_C1 = np.uint32(0xCC9E2D51)
_C2 = np.uint32(0x1B873593)
_M5 = np.uint32(5)
_N1 = np.uint32(0xE6546B64)
_F1 = np.uint32(0x85EBCA6B)
_F2 = np.uint32(0xC2B2AE35)


def _rotl_inplace(x: np.ndarray, r: int) -> None:
    spill = x >> np.uint32(32 - r)
    x <<= np.uint32(r)
    x |= spill


def _mix_k1(k1: np.ndarray) -> None:
    """Spark's ``mixK1``, in place. uint32 ops wrap mod 2**32 exactly like Java int arithmetic, and
    in-place ops avoid a temporary per operation, which otherwise dominates the run time."""
    k1 *= _C1
    _rotl_inplace(k1, 15)
    k1 *= _C2


def _mix_h1(h1: np.ndarray, k1: np.ndarray) -> None:
    """Spark's ``mixH1``, in place on h1."""
    h1 ^= k1
    _rotl_inplace(h1, 13)
    h1 *= _M5
    h1 += _N1


def _fmix(h1: np.ndarray, length: np.ndarray) -> None:
    """Murmur3's finalizer with the byte length, in place."""
    h1 ^= length.astype(np.uint32)
    h1 ^= h1 >> np.uint32(16)
    h1 *= _F1
    h1 ^= h1 >> np.uint32(13)
    h1 *= _F2
    h1 ^= h1 >> np.uint32(16)


def _utf8_buffers(arr: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(data bytes, per-row start, per-row length); null rows get length 0 so they cost nothing."""
    _, offsets_buf, data_buf = arr.buffers()
    large = pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type)
    offsets = np.frombuffer(offsets_buf, dtype=np.int64 if large else np.int32)
    # Widened to int64 so block-position arithmetic never overflows, even for string (int32) offsets.
    offsets = offsets[arr.offset: arr.offset + len(arr) + 1].astype(np.int64)
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.empty(0, np.uint8)
    starts = offsets[:-1]
    lengths = np.diff(offsets)
    if arr.null_count:
        # Arrow lets a null slot span arbitrary bytes; skipping them keeps the block loop short.
        lengths[np.asarray(arr.is_null())] = 0
    return data, starts, lengths


def _le_words(data: np.ndarray) -> np.ndarray:
    """An overlapping view: element i is the little-endian uint32 at byte i (Platform.getInt on x86)."""
    if data.size < 4:
        return np.empty(0, dtype="<u4")
    return np.ndarray(shape=(data.size - 3,), dtype="<u4", buffer=data, strides=(1,))


def _block_schedule(nblocks: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
    """(row order, active counts): after ordering, the rows with more than j blocks are the first
    ``active[j]`` ones. ``order`` is None when every row has the same block count (fixed-width keys)."""
    max_blocks = int(nblocks.max())
    if int(nblocks.min()) == max_blocks:
        return None, np.full(max_blocks, len(nblocks))
    # A <=16-bit sort key lets numpy use its radix sort; stable keeps each group in memory order.
    key = (max_blocks - nblocks).astype(np.min_scalar_type(max_blocks))
    order = np.argsort(key, kind="stable")
    active = len(nblocks) - np.cumsum(np.bincount(nblocks, minlength=max_blocks))
    return order, active[:max_blocks]


def _hash_blocks(h: np.ndarray, words: np.ndarray, starts: np.ndarray, nblocks: np.ndarray) -> None:
    """Mix every full 4-byte block of every row into h (in place, original row order)."""
    if len(nblocks) == 0 or int(nblocks.max()) == 0:
        return
    order, active = _block_schedule(nblocks)
    pos = starts.copy() if order is None else starts[order]
    hs = h if order is None else h[order]
    for n, steps in _runs(active):
        # mixK1 does not depend on h, so a run of steps with the same active rows gathers and mixes
        # all its blocks at once; only mixH1 has to walk the steps one by one. This is what keeps
        # a few very long keys (one active row for thousands of steps) from costing ~15 numpy
        # calls per 4 bytes.
        k1 = words[pos[:n] + 4 * np.arange(steps)[:, None]]  # (steps, n): each step contiguous
        _mix_k1(k1)
        for row in k1:
            _mix_h1(hs[:n], row)
        pos[:n] += 4 * steps
    if order is not None:
        h[order] = hs


# Cap on gathered block words per run, so many long keys in one slice don't allocate a huge matrix.
_RUN_WORDS = 1 << 18


def _runs(active: np.ndarray) -> list[tuple[int, int]]:
    """Split the per-step active counts into (active rows, steps) runs of equal counts."""
    change = np.flatnonzero(np.diff(active)) + 1
    bounds = np.concatenate(([0], change, [len(active)])).tolist()
    runs: list[tuple[int, int]] = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        n = int(active[lo])
        cap = max(1, _RUN_WORDS // n)
        runs.extend((n, min(cap, hi - s)) for s in range(lo, hi, cap))
    return runs


def _hash_tails(h: np.ndarray, signed: np.ndarray, tail_start: np.ndarray, rem: np.ndarray) -> None:
    """Spark's legacy tail: each leftover byte, sign-extended, is one full mix round (in place)."""
    for k in range(3):
        idx = np.flatnonzero(rem > k)
        if idx.size == 0:
            break
        k1 = signed[tail_start[idx] + k].astype(np.int32).view(np.uint32)
        _mix_k1(k1)
        hk = h[idx]
        _mix_h1(hk, k1)
        h[idx] = hk


def _hash_rows(words: np.ndarray, signed: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
               seed: int) -> np.ndarray:
    """Murmur3 (Spark legacy variant) of the byte ranges [start, start + length) as uint32."""
    h = np.full(len(starts), seed & 0xFFFFFFFF, dtype=np.uint32)
    nblocks = lengths >> 2
    _hash_blocks(h, words, starts, nblocks)
    _hash_tails(h, signed, starts + (nblocks << 2), lengths & 3)
    _fmix(h, lengths)
    return h


# Rows per slice: keeps each slice's working arrays cache-resident, and confines a pathological
# long key's block loop to its own slice.
_CHUNK_ROWS = 65536


def _hash_array(arr: pa.Array, seed: int) -> np.ndarray:
    arr = _normalize(arr)
    data, starts, lengths = _utf8_buffers(arr)
    words, signed = _le_words(data), data.view(np.int8)
    out = np.empty(len(arr), dtype=np.uint32)
    for lo in range(0, len(arr), _CHUNK_ROWS):
        hi = lo + _CHUNK_ROWS
        out[lo:hi] = _hash_rows(words, signed, starts[lo:hi], lengths[lo:hi], seed)
    if arr.null_count:
        out[np.asarray(arr.is_null())] = seed & 0xFFFFFFFF  # Spark: hash(null) is the seed
    return out.view(np.int32)


def _normalize(arr: pa.Array) -> pa.Array:
    """Bring dictionary and view encodings to the offsets+data layout the hasher reads."""
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if pa.types.is_string_view(arr.type):
        arr = arr.cast(pa.large_string())
    elif pa.types.is_binary_view(arr.type):
        arr = arr.cast(pa.large_binary())
    t = arr.type
    if not any(check(t) for check in (pa.types.is_string, pa.types.is_large_string,
                                      pa.types.is_binary, pa.types.is_large_binary)):
        raise TypeError(f"spark_hash_strings needs a string or binary array, got {t}")
    return arr


def spark_hash_strings(values: pa.Array | pa.ChunkedArray, seed: int = 42) -> np.ndarray:
    """Spark's ``hash(col)`` (Murmur3_x86_32, legacy tail) for each value of a string column, as int32.

    Accepts string / large_string (also binary, string_view and dictionary-encoded strings, which
    Spark hashes identically by their bytes). Nulls hash to ``seed``, as in Spark.
    """
    if isinstance(values, pa.ChunkedArray):
        parts = [_hash_array(chunk, seed) for chunk in values.chunks]
        return np.concatenate(parts) if parts else np.empty(0, dtype=np.int32)
    return _hash_array(values, seed)


def bucket_ids(keys: pa.Array | pa.ChunkedArray, num_buckets: int) -> np.ndarray:
    """``pmod(hash(key), num_buckets)`` exactly as Spark computes it, as int32 in [0, num_buckets)."""
    return buckets_of(spark_hash_strings(keys), num_buckets)


def buckets_of(hashes: np.ndarray, num_buckets: int) -> np.ndarray:
    """``pmod(hash, num_buckets)`` of hashes `spark_hash_strings` gave (seed 42), as int32."""
    if num_buckets < 1:
        raise ValueError(f"num_buckets must be >= 1, got {num_buckets}")
    # numpy's % is floored for a positive divisor, which is Spark's pmod (non-negative remainder).
    return (hashes.astype(np.int64) % num_buckets).astype(np.int32)
