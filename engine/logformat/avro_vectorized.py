"""The column-at-a-time Avro codec (numpy + pyarrow) of engine.logformat.avro_codec, for flat record schemas
whose fields are primitives (or nullable unions of one primitive); fastavro is the byte-level reference it must
match (BENCHMARKS.md, bench_avro_codec)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.logformat.avro_framing import _HEADER, BLOCK_CONTENT_VERSION, _record_spans
from engine.logformat.avro_schema_map import AvroCodecError

# --------------------------------------------------------------------------- vectorized plan


@dataclass(frozen=True)
class _FieldPlan:
    """How one top-level field is laid out in each datum, for the column-at-a-time codec."""

    name: str
    kind: str  # Avro base type: boolean | int | long | float | double | bytes | string | decimal
    arrow_type: pa.DataType
    null_code: int | None  # union branch varint byte of the null branch; None when the field is not a union
    value_code: int


_VECTOR_KINDS = {"boolean", "int", "long", "float", "double", "bytes", "string"}


def _plain_kind(avro_type: Any) -> str | None:
    """Vectorizable base kind of a non-union type, or None when only fastavro handles it."""
    if isinstance(avro_type, str):
        return avro_type if avro_type in _VECTOR_KINDS else None
    if not isinstance(avro_type, dict) or avro_type.get("type") not in _VECTOR_KINDS:
        return None
    if avro_type.get("logicalType") == "decimal":
        # decimal256 needs > 16-byte unscaled values; keep that rare case on fastavro.
        return "decimal" if avro_type["type"] == "bytes" and int(avro_type["precision"]) <= 38 else None
    return str(avro_type["type"])


def _field_plan(field: pa.Field, avro_type: Any) -> _FieldPlan | None:
    if not isinstance(avro_type, list):
        kind = _plain_kind(avro_type)
        return None if kind is None else _FieldPlan(field.name, kind, field.type, None, 0)
    if len(avro_type) != 2 or "null" not in avro_type:
        return None
    null_index = avro_type.index("null")
    kind = _plain_kind(avro_type[1 - null_index])
    if kind is None:
        return None
    # A union index is a zigzag varint: branch 0 -> byte 0x00, branch 1 -> byte 0x02.
    return _FieldPlan(field.name, kind, field.type, 2 * null_index, 2 * (1 - null_index))


def _vector_plan(avro_schema: dict[str, Any], target: pa.Schema) -> list[_FieldPlan] | None:
    """Per-field plans when every field is a flat primitive (or [null, primitive]); else None."""
    plans = []
    for field, avro_field in zip(target, avro_schema.get("fields", [])):
        plan = _field_plan(field, avro_field["type"])
        if plan is None:
            return None
        plans.append(plan)
    return plans


# --------------------------------------------------------------------------- vectorized decoding

_U64 = np.uint64


def _zigzag_decode(raw: np.ndarray) -> np.ndarray:
    return ((raw >> _U64(1)) ^ (_U64(0) - (raw & _U64(1)))).view(np.int64)


def _check_room(pos: np.ndarray, ends: np.ndarray, width: int | np.ndarray, what: str) -> None:
    bad = np.flatnonzero(pos + width > ends)
    if bad.size:
        raise AvroCodecError(f"Avro datum truncated while reading {what} (record #{int(bad[0])} of the field's records)")


_HIGH_BITS = _U64(0x8080808080808080)
_LOW_7_BITS = _U64(0x7F7F7F7F7F7F7F7F)
# (keep mask, shift) steps that squeeze the 7-bit groups of 8 bytes into 56 contiguous bits
_SQUEEZE = [
    (_U64(0x007F007F007F007F), _U64(0x7F007F007F007F00), _U64(1)),
    (_U64(0x00003FFF00003FFF), _U64(0x3FFF00003FFF0000), _U64(2)),
    (_U64(0x000000000FFFFFFF), _U64(0x0FFFFFFF00000000), _U64(4)),
]


def _read_varints(data: np.ndarray, pos: np.ndarray, ends: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Raw (un-zigzagged) varints at `pos`: returns values and the advanced positions.

    Reads 8 bytes per record in one gather and finds the terminating byte with bit tricks; the
    rare varints longer than 8 bytes (or too close to the buffer end) take the byte-wise path.
    """
    _check_room(pos, ends, 1, what)
    limit = data.size - 8
    if limit < 0 or pos.size == 0:
        return _read_varints_bytewise(data, pos, ends, what)
    words = np.ndarray(shape=(limit + 1,), dtype="<u8", buffer=data, strides=(1,))[np.minimum(pos, limit)]
    terminators = ~words & _HIGH_BITS
    lowest = terminators & (_U64(0) - terminators)  # bit 8k+7 of the first byte k without continuation
    size = (np.bitwise_count(lowest - _U64(1)).astype(np.int64) + 1) >> 3
    raw = words & ((lowest << _U64(1)) - _U64(1)) & _LOW_7_BITS
    for low, high, shift in _SQUEEZE:
        raw = (raw & low) | ((raw & high) >> shift)
    slow = np.flatnonzero((terminators == 0) | (pos > limit))
    if slow.size:
        raw[slow], slow_end = _read_varints_bytewise(data, pos[slow], ends[slow], what)
        size[slow] = slow_end - pos[slow]
    _check_room(pos, ends, size, what)
    return raw, pos + size


def _read_varints_bytewise(data: np.ndarray, pos: np.ndarray, ends: np.ndarray, what: str
                           ) -> tuple[np.ndarray, np.ndarray]:
    """Byte-at-a-time varint decoding; each round touches only the varints that continue."""
    _check_room(pos, ends, 1, what)
    byte = data[pos]
    raw = (byte & 0x7F).astype(_U64)
    size = np.ones(pos.shape, dtype=np.int64)
    active = np.flatnonzero(byte & 0x80)
    shift = 7
    while active.size:
        if shift >= 70:
            raise AvroCodecError(f"Avro varint longer than 10 bytes while reading {what}")
        if active.size == pos.size:  # every varint continues (timestamps): skip the fancy indexing
            at = pos + size
            _check_room(at, ends, 1, what)
            byte = data[at]
            raw |= (byte & 0x7F).astype(_U64) << _U64(shift)
            size += 1
        else:
            at = pos[active] + size[active]
            _check_room(at, ends[active], 1, what)
            byte = data[at]
            raw[active] |= (byte & 0x7F).astype(_U64) << _U64(shift)
            size[active] += 1
        active = active[(byte & 0x80) != 0]
        shift += 7
    return raw, pos + size


def _read_fixed(data: np.ndarray, pos: np.ndarray, ends: np.ndarray, dtype: str, what: str) -> np.ndarray:
    """Little-endian fixed-width values at arbitrary byte offsets, in one gather.

    A view with a 1-byte stride makes element p the (unaligned) value starting at byte p.
    """
    width = np.dtype(dtype).itemsize
    _check_room(pos, ends, width, what)
    if data.size < width:
        return np.empty(0, dtype=dtype)
    shifted = np.ndarray(shape=(data.size - width + 1,), dtype=dtype, buffer=data, strides=(1,))
    values: np.ndarray = shifted[pos]
    return values


def _read_lengths(data: np.ndarray, pos: np.ndarray, ends: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Byte-string lengths and the positions of their first byte; checks they stay in the record."""
    _check_room(pos, ends, 1, what)
    first = data[pos]
    if first.size == 0 or first.max() < 0x80:
        # Fast path: every length is a one-byte varint (< 64 bytes), the common case for Hudi keys.
        if np.any(first & 1):
            raise AvroCodecError(f"Avro datum has a negative length while reading {what}")
        lengths, pos = (first >> 1).astype(np.int64), pos + 1
    else:
        raw, pos = _read_varints(data, pos, ends, what)
        lengths = _zigzag_decode(raw)
    if lengths.size and lengths.min() < 0:
        raise AvroCodecError(f"Avro datum has a negative length while reading {what}")
    _check_room(pos, ends, lengths, what)
    return lengths, pos


def _gather_bytes(content: pa.Buffer, starts: np.ndarray, lengths: np.ndarray) -> tuple[pa.Buffer, np.ndarray]:
    """Concatenate content[starts[i]:starts[i]+lengths[i]] in C++ (pyarrow take).

    The slices are ordered and disjoint, so alternating [string, gap] offsets form a valid
    large_binary array over the whole content; taking its even elements copies just the strings.
    """
    n = starts.size
    offsets = np.empty(2 * n + 1, dtype=np.int64)
    offsets[0 : 2 * n : 2] = starts
    offsets[1 : 2 * n : 2] = starts + lengths
    offsets[2 * n] = offsets[2 * n - 1] if n else 0
    spans = pa.LargeBinaryArray.from_buffers(pa.large_binary(), 2 * n, [None, pa.py_buffer(offsets), content])
    index_type = np.int32 if 2 * n < 2**31 else np.int64
    picked = pc.take(spans, pa.array(np.arange(0, 2 * n, 2, dtype=index_type)))
    value_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=value_offsets[1:])
    data_buffer = picked.buffers()[2] or pa.py_buffer(b"")
    return data_buffer, value_offsets


def _validity(valid: np.ndarray | None) -> pa.Buffer | None:
    return None if valid is None else pa.py_buffer(np.packbits(valid, bitorder="little"))


def _binary_array(plan: _FieldPlan, content: pa.Buffer, starts: np.ndarray, lengths: np.ndarray,
                  valid: np.ndarray | None) -> pa.Array:
    data_buffer, offsets = _gather_bytes(content, starts, lengths)
    large = offsets[-1] >= 2**31
    base = pa.large_string() if plan.kind == "string" else pa.large_binary()
    dtype = base if large else (pa.string() if plan.kind == "string" else pa.binary())
    offsets = offsets if large else offsets.astype(np.int32)
    null_count = -1 if valid is None else int(starts.size - np.count_nonzero(valid))
    array = pa.Array.from_buffers(dtype, starts.size, [_validity(valid), pa.py_buffer(offsets), data_buffer],
                                  null_count=max(null_count, 0))
    if plan.kind == "string":
        try:
            array.validate(full=True)  # UTF-8 check: Avro strings must be valid UTF-8
        except pa.ArrowInvalid as exc:
            raise AvroCodecError(f"field {plan.name!r} holds a string that is not valid UTF-8") from exc
    return array.cast(plan.arrow_type) if large else array


def _decimal_values(data: np.ndarray, pos: np.ndarray, lengths: np.ndarray, what: str) -> np.ndarray:
    """Big-endian two's-complement byte strings -> 16-byte little-endian decimal128 rows."""
    if lengths.size and lengths.max() > 16:
        raise AvroCodecError(f"{what}: decimal of {int(lengths.max())} bytes does not fit decimal128")
    little = np.arange(16)
    source = pos[:, None] + lengths[:, None] - 1 - little  # little-endian byte t sits at end - 1 - t
    inside = little < lengths[:, None]
    raw = data[np.where(inside, source, 0)]
    negative = (lengths > 0) & (data[np.where(lengths > 0, pos, 0)] >= 0x80)
    fill = np.where(negative, 0xFF, 0).astype(np.uint8)[:, None]
    return np.where(inside, raw, fill).astype(np.uint8)


def _decode_values(data: np.ndarray, pos: np.ndarray, ends: np.ndarray, plan: _FieldPlan
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Values of one field for the records at `pos`, and the positions after them."""
    what = f"field {plan.name!r}"
    if plan.kind in ("int", "long"):
        raw, pos = _read_varints(data, pos, ends, what)
        values = _zigzag_decode(raw)
        if plan.kind == "int":
            if values.size and (values.min() < -(2**31) or values.max() >= 2**31):
                raise AvroCodecError(f"{what}: Avro int out of the 32-bit range")
            values = values.astype(np.int32)
        return values, pos
    if plan.kind in ("float", "double"):
        width = 4 if plan.kind == "float" else 8
        return _read_fixed(data, pos, ends, "<f4" if width == 4 else "<f8", what), pos + width
    if plan.kind == "boolean":
        _check_room(pos, ends, 1, what)
        values = data[pos]
        if values.size and values.max() > 1:
            raise AvroCodecError(f"{what}: boolean byte {int(values.max())} is neither 0 nor 1")
        return values.astype(bool), pos + 1
    lengths, pos = _read_lengths(data, pos, ends, what)  # decimal
    return _decimal_values(data, pos, lengths, what), pos + lengths


def _union_branches(data: np.ndarray, pos: np.ndarray, ends: np.ndarray, plan: _FieldPlan) -> np.ndarray:
    """Per-record "has a value" mask from the union branch byte."""
    _check_room(pos, ends, 1, f"field {plan.name!r}")
    code = data[pos]
    # Both legal codes are 0x00 and 0x02: any other bit set means a garbled branch.
    if np.any(code & 0xFD):
        bad = int(code[(code & 0xFD) != 0][0])
        raise AvroCodecError(f"field {plan.name!r}: union branch byte {bad:#04x} is not a branch of [null, T]")
    present: np.ndarray = code == plan.value_code
    return present


def _decode_field(data: np.ndarray, content: pa.Buffer, pos: np.ndarray, ends: np.ndarray,
                  plan: _FieldPlan) -> pa.Array:
    """Decode one field for all records; advances `pos` in place."""
    n = pos.size
    valid = None
    if plan.null_code is not None:
        valid = _union_branches(data, pos, ends, plan)
        pos += 1
        if valid.all():
            valid = None
    rows = None if valid is None else np.flatnonzero(valid)
    at = pos if rows is None else pos[rows]
    at_ends = ends if rows is None else ends[rows]
    if plan.kind in ("string", "bytes"):
        lengths, at = _read_lengths(data, at, at_ends, f"field {plan.name!r}")
        if rows is None:
            np.add(at, lengths, out=pos)
            return _binary_array(plan, content, at, lengths, valid)
        # null records get an empty slice at their current position, which keeps the slices ordered
        starts, all_lengths = pos.copy(), np.zeros(n, dtype=np.int64)
        starts[rows], all_lengths[rows] = at, lengths
        pos[rows] = at + lengths
        return _binary_array(plan, content, starts, all_lengths, valid)
    values, at = _decode_values(data, at, at_ends, plan)
    _scatter(pos, rows, at)
    full = values if rows is None else _expand(values, rows, n)
    if plan.kind == "boolean":
        full = np.packbits(full, bitorder="little")
    null_count = 0 if rows is None else n - rows.size   # rows is None exactly when every record has a value
    return pa.Array.from_buffers(plan.arrow_type, n, [_validity(valid), pa.py_buffer(np.ascontiguousarray(full))],
                                 null_count=null_count)


def _scatter(target: np.ndarray, rows: np.ndarray | None, values: np.ndarray) -> None:
    if rows is None:
        target[:] = values
    else:
        target[rows] = values


def _expand(values: np.ndarray, rows: np.ndarray, n: int) -> np.ndarray:
    full = np.zeros((n,) + values.shape[1:], dtype=values.dtype)
    full[rows] = values
    return full


def _decode_vectorized(view: memoryview, count: int, plans: list[_FieldPlan], target: pa.Schema) -> pa.Table:
    starts, ends = _record_spans(view, count)
    data = np.frombuffer(view, dtype=np.uint8)
    content = pa.py_buffer(view)
    pos = starts.copy()
    columns = [_decode_field(data, content, pos, ends, plan) for plan in plans]
    bad = np.flatnonzero(pos != ends)
    if bad.size:
        i = int(bad[0])
        raise AvroCodecError(f"Avro data block record {i} decodes to {int(pos[i] - starts[i])} of its "
                             f"{int(ends[i] - starts[i])} bytes")
    return pa.Table.from_arrays(columns, schema=target)


# --------------------------------------------------------------------------- vectorized encoding

# A full-width matrix piece at least this wide stays out of a masked compaction (`_segments`): masking costs
# ~1.7 ns a byte, one more segment for the row-wise join ~20 ns a row.
_WIDE = 16


@dataclass
class _Piece:
    """Bytes one field contributes to every datum: either the first `lengths[i]` bytes of row i of `matrix`
    (all of its bytes on every row when `lengths` is None), or element i of the binary array `values`."""

    lengths: np.ndarray | None
    matrix: np.ndarray | None = None
    values: pa.Array | None = None

    @property
    def width(self) -> int:
        """The bytes of every row, for a full-width matrix piece."""
        assert self.matrix is not None and self.lengths is None
        return int(self.matrix.shape[1])

    def byte_counts(self) -> np.ndarray | int:
        """Bytes per row: an array, or one number for every row."""
        return self.width if self.lengths is None else self.lengths


def _matrix_piece(matrix: np.ndarray, sizes: np.ndarray | None, valid: np.ndarray | None) -> _Piece:
    """A matrix piece whose row i holds `sizes[i]` bytes (None: all of its bytes), none on a null row. When every
    row uses the whole width no lengths are kept: its rows are copied whole, with nothing to mask."""
    width = matrix.shape[1]
    if valid is None:
        if sizes is None or int(sizes.min(initial=width)) == width:
            return _Piece(None, matrix=matrix)
        return _Piece(sizes, matrix=matrix)
    used = np.full(matrix.shape[0], width, dtype=np.int64) if sizes is None else sizes
    return _Piece(used * valid, matrix=matrix)


def _constant(row: bytes, n: int) -> np.ndarray:
    """The same bytes on each of n rows: a read-only broadcast view, nothing allocated per row."""
    return np.broadcast_to(np.frombuffer(row, dtype=np.uint8), (n, len(row)))


def _is_constant(piece: _Piece) -> bool:
    return piece.lengths is None and piece.matrix is not None and piece.matrix.strides[0] == 0


def _zigzag_varints(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Avro varint bytes (rows, up to 10 wide) and byte counts for int64 values.

    The width comes from the largest value, so short varints (string lengths, small ints: one byte) cost one
    pass instead of ten; each byte's continuation bit is whether the value still left is >= 0x80."""
    v = values.astype(np.int64, copy=False)
    raw = ((v << 1) ^ (v >> 63)).view(_U64)
    top = int(raw.max()) if raw.size else 0
    width = max(1, (top.bit_length() + 6) // 7)
    sizes = np.ones(raw.shape, dtype=np.int64)
    matrix = np.empty((raw.size, width), dtype=np.uint8)
    rest = raw
    for k in range(width):
        group = (rest & _U64(0x7F)).astype(np.uint8)
        if k + 1 < width:
            more = rest >= _U64(0x80)
            sizes += more
            group |= more.view(np.uint8) << np.uint8(7)
            rest = rest >> _U64(7)
        matrix[:, k] = group
    return matrix, sizes


def _numpy_values(array: pa.Array, dtype: Any) -> np.ndarray:
    """Value buffer of a fixed-width arrow array as numpy (null slots hold arbitrary values)."""
    return np.frombuffer(array.buffers()[1], dtype=dtype, count=array.offset + len(array))[array.offset :]


def _valid_mask(array: pa.Array) -> np.ndarray | None:
    """Which rows hold a value; None when all do (the usual case: no mask to apply)."""
    if array.null_count == 0:
        return None
    mask: np.ndarray = array.is_valid().to_numpy(zero_copy_only=False)
    return mask


def _decimal_pieces(array: pa.Array, valid: np.ndarray | None) -> list[_Piece]:
    """fastavro's decimal bytes: (|unscaled|.bit_length() + 8) // 8 big-endian two's-complement bytes."""
    little = _numpy_values(array, np.dtype((np.uint8, 16)))
    negative = little[:, 15] >= 0x80
    magnitude = np.where(negative[:, None], ~little, little).astype(np.uint16)
    # two's-complement negate = invert + 1, with the carry rippling through the low bytes
    carry: np.ndarray = negative.astype(np.uint16)
    for t in range(16):
        magnitude[:, t] += carry
        carry = magnitude[:, t] >> 8
        magnitude[:, t] &= 0xFF
    nonzero = magnitude != 0
    top = np.where(nonzero.any(axis=1), 15 - np.argmax(nonzero[:, ::-1], axis=1), -1)
    top_byte = magnitude[np.arange(little.shape[0]), np.maximum(top, 0)]
    bit_length = np.where(top >= 0, 8 * top + _BIT_LENGTH[top_byte], 0)
    sizes = (bit_length + 8) // 8
    big = np.take_along_axis(little, np.clip(sizes[:, None] - 1 - np.arange(16), 0, 15), axis=1)
    header, header_sizes = _zigzag_varints(sizes)
    return [_matrix_piece(header, header_sizes, valid), _matrix_piece(big, sizes, valid)]


_BIT_LENGTH = np.array([int(i).bit_length() for i in range(256)], dtype=np.int64)


def _value_pieces(array: pa.Array, plan: _FieldPlan, valid: np.ndarray | None) -> list[_Piece]:
    n = len(array)
    if plan.kind in ("string", "bytes"):
        offsets = np.frombuffer(array.buffers()[1], dtype=np.int32, count=array.offset + n + 1)[array.offset :]
        lengths = np.diff(offsets).astype(np.int64)
        if valid is None and n and int(lengths.min()) == int(lengths.max()):
            return _uniform_pieces(array, int(offsets[0]), int(lengths[0]))
        if valid is not None:
            lengths *= valid
        header, header_sizes = _zigzag_varints(lengths)
        return [_matrix_piece(header, header_sizes, valid), _Piece(lengths, values=array.cast(pa.large_binary()))]
    if plan.kind in ("int", "long"):
        matrix, sizes = _zigzag_varints(_numpy_values(array, np.int32 if plan.kind == "int" else np.int64))
        return [_matrix_piece(matrix, sizes, valid)]
    if plan.kind in ("float", "double"):
        dtype = "<f4" if plan.kind == "float" else "<f8"
        matrix = np.ascontiguousarray(_numpy_values(array, dtype)).view(np.uint8).reshape(n, -1)
        return [_matrix_piece(matrix, None, valid)]
    if plan.kind == "boolean":
        bits = np.unpackbits(np.frombuffer(array.buffers()[1], dtype=np.uint8), bitorder="little")
        return [_matrix_piece(bits[array.offset : array.offset + n].reshape(n, 1), None, valid)]
    return _decimal_pieces(array, valid)


def _uniform_pieces(array: pa.Array, start: int, width: int) -> list[_Piece]:
    """A byte-string column without nulls whose values all have `width` bytes (the meta fields' commit time,
    partition path and file name; fixed-format keys): its values are an n x width matrix, a view of the column's
    data from byte `start`, and its length varint the same bytes on every row. As full-width matrix pieces they
    are copied with their neighbours' fixed-width bytes (`_compact`) instead of each being one more segment of
    the row-wise join (`_join_records`), whose cost follows rows × segments more than bytes."""
    n = len(array)
    header, sizes = _zigzag_varints(np.array([width], dtype=np.int64))
    values = (np.frombuffer(array.buffers()[2], dtype=np.uint8, count=start + n * width)[start:].reshape(n, width)
              if width else np.empty((n, 0), dtype=np.uint8))
    return [_Piece(None, matrix=_constant(header[0, : int(sizes[0])].tobytes(), n)), _Piece(None, matrix=values)]


def _field_pieces(array: pa.Array, plan: _FieldPlan) -> list[_Piece]:
    valid = _valid_mask(array)
    pieces = []
    if plan.null_code is not None:
        if valid is None:
            pieces.append(_Piece(None, matrix=_constant(bytes([plan.value_code]), len(array))))
        else:
            codes = np.where(valid, plan.value_code, plan.null_code).astype(np.uint8).reshape(-1, 1)
            pieces.append(_Piece(None, matrix=codes))
    return pieces + _value_pieces(array, plan, valid)


def _merge_constants(pieces: list[_Piece]) -> list[_Piece]:
    """Runs of constant pieces (union codes without nulls, a fixed-width string's length) as one constant each:
    fewer, wider copies."""
    out: list[_Piece] = []
    for piece in pieces:
        if out and _is_constant(piece) and _is_constant(out[-1]):
            previous, matrix = out[-1].matrix, piece.matrix
            assert previous is not None and matrix is not None
            out[-1] = _Piece(None, matrix=_constant(previous[0].tobytes() + matrix[0].tobytes(), matrix.shape[0]))
        else:
            out.append(piece)
    return out


def _compact(pieces: list[_Piece]) -> pa.Array:
    """One large_binary element per record: the used bytes of consecutive matrix pieces."""
    pieces = _merge_constants(pieces)
    matrices: list[np.ndarray] = []
    for p in pieces:
        assert p.matrix is not None, "_compact joins matrix pieces only (_segments groups them so)"
        matrices.append(p.matrix)
    n = matrices[0].shape[0]
    if all(p.lengths is None for p in pieces):
        # every byte of every row is used (codes, doubles, fixed-width strings, no nulls): no mask to apply
        width = sum(m.shape[1] for m in matrices)
        data = _side_by_side(matrices, n, width)
        offsets = np.arange(n + 1, dtype=np.int64) * width
    else:
        matrix = np.hstack(matrices) if len(matrices) > 1 else np.ascontiguousarray(matrices[0])
        used = np.hstack([np.broadcast_to(True, m.shape) if p.lengths is None
                          else np.arange(m.shape[1]) < p.lengths[:, None] for m, p in zip(matrices, pieces)])
        data = pa.py_buffer(matrix[used])
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(sum(p.byte_counts() for p in pieces), out=offsets[1:])
    return pa.LargeBinaryArray.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offsets), data])


def _side_by_side(matrices: list[np.ndarray], n: int, width: int) -> pa.Buffer:
    """The matrices' rows side by side, row after row, in a buffer of Arrow's pool (whose freed pages executors
    keep: no page faults for a block's ~20 MB buffer). Each matrix is copied as one `V<its width>` item per row:
    one copy of the item per row, about twice as fast as `np.hstack`'s byte-wise inner loop on narrow rows.
    Constants (union codes, fixed lengths) are not copied column by column (a strided fill costs as much as a
    copy): they are laid in one row, which fills every row first by doubling contiguous copies."""
    buffer = pa.allocate_buffer(n * width)
    out = np.frombuffer(buffer, dtype=np.uint8)
    row = np.zeros(width, dtype=np.uint8)
    copies, at = [], 0
    for matrix in matrices:
        w = matrix.shape[1]
        if matrix.strides[0] == 0:
            row[at : at + w] = matrix[0]
        elif w:
            copies.append((at, w, matrix))
        at += w
    if len(copies) < len(matrices):
        _fill_rows(out, row)
    for at, w, matrix in copies:
        target = np.ndarray(shape=(n,), dtype=f"V{w}", buffer=out, offset=at, strides=(width,))
        target[...] = np.ascontiguousarray(matrix).reshape(-1).view(f"V{w}")
    return buffer


def _fill_rows(out: np.ndarray, row: np.ndarray) -> None:
    """`out` (a whole number of rows) filled with `row` over and over: each step copies what is filled so far,
    ~log2(rows) contiguous copies in all."""
    out[: row.size] = row
    done, total = row.size, out.size
    while done < total:
        step = min(done, total - done)
        out[done : done + step] = out[:step]
        done += step


def _runs(run: list[_Piece]) -> list[list[_Piece]]:
    """A run of matrix pieces as the runs `_compact` copies: whole when every piece is full-width; else the wide
    full-width pieces apart from the pieces of varying width, so the mask covers only narrow bytes."""
    if all(p.lengths is None for p in run):
        return [run]
    out: list[list[_Piece]] = [[]]
    kind = None   # of the current run: "wide" (full-width, >= _WIDE bytes) or "varying"; narrow full ones join any
    for piece in run:
        this = "varying" if piece.lengths is not None else "wide" if piece.width >= _WIDE else None
        if this is not None and kind is not None and this != kind:
            out.append([])
            kind = None
        out[-1].append(piece)
        kind = kind or this
    return out


def _segments(pieces: list[_Piece]) -> list[pa.Array]:
    """Merge runs of matrix pieces; binary pieces stay as their own segment."""
    segments: list[pa.Array] = []
    run: list[_Piece] = []
    for piece in pieces:
        if piece.matrix is not None:
            run.append(piece)
            continue
        segments.extend(_compact(r) for r in _runs(run) if r)
        run = []
        segments.append(piece.values)
    segments.extend(_compact(r) for r in _runs(run) if r)
    return segments


def _join_records(segments: list[pa.Array]) -> memoryview:
    """For each record, its element of every segment in order, all records back to back.

    binary_join_element_wise with an empty separator concatenates row-wise in one C++ pass, so the
    result's data buffer is already the records' bytes (null strings count as empty); returned as a view of
    that buffer, not copied. A single segment already is the records' bytes.
    """
    if len(segments) == 1:
        joined = segments[0]
    else:
        separator = pa.scalar(b"", pa.large_binary())
        joined = pc.binary_join_element_wise(*segments, separator, null_handling="replace", null_replacement="")
    offsets = np.frombuffer(joined.buffers()[1], dtype=np.int64, count=joined.offset + len(joined) + 1)[joined.offset:]
    return memoryview(joined.buffers()[2].slice(int(offsets[0]), int(offsets[-1] - offsets[0])))


def _encode_vectorized(table: pa.Table, plans: list[_FieldPlan]) -> list[bytes | memoryview]:
    n = table.num_rows
    head = _HEADER.pack(BLOCK_CONTENT_VERSION, n)
    if n == 0:
        return [head]
    pieces = []
    for plan in plans:
        pieces.extend(_field_pieces(table.column(plan.name).combine_chunks(), plan))
    fixed = sum(p.width for p in pieces if p.lengths is None)
    varying = [p.lengths for p in pieces if p.lengths is not None]
    record_lengths = varying[0] + fixed if varying else None
    for lengths in varying[1:]:
        record_lengths += lengths
    if (fixed if record_lengths is None else int(record_lengths.max())) >= 2**31:
        raise AvroCodecError("an Avro record exceeds 2 GiB")
    # the int32 BE length before each datum: the same bytes on every row when every record has one length
    prefix = _Piece(None, matrix=_constant(fixed.to_bytes(4, "big"), n) if record_lengths is None
                    else record_lengths.astype(">i4").view(np.uint8).reshape(n, 4))
    return [head, _join_records(_segments([prefix, *pieces]))]
