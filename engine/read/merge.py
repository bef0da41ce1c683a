"""Record merging: base file + log blocks of one file slice -> the slice's current records.

Merging is vectorised and done in two phases so that a large base file can be *streamed*:

1. `merge_log_items` folds the slice's log blocks (in log order) into one winner per record key,
   remembering for every key whether a processing-time delete ("always wins") happened in the logs.
2. `apply_to_base` resolves each batch of base rows against those winners, and `remaining_log_rows`
   returns the log winners that no base row shadowed (new inserts, or updates that won).

Semantics, matching hudi 0.5.0 and Java Hudi's file group reader (docs/ARCHITECTURE.md, "Merge rules"):
- COMMIT_TIME_ORDERING: the latest record in log order wins; a delete removes the key; the logs always
  beat the base.
- EVENT_TIME_ORDERING, folded over the logs in order, one winner per key:
  - a record or a delete with an ordering value replaces the current winner when its ordering value is
    ≥ the winner's (ties go to the later one);
  - a delete without an ordering value (or with 0, "processing time") always replaces the winner, and a
    record after it always replaces it — but a delete *with* an ordering value after it is ignored;
  - the log winner then meets the base row: a processing-time delete removes it; otherwise the greater
    ordering value wins, ties to the log. A processing-time delete that a later record replaced is
    forgotten: that record competes with the base row by ordering value like any other.
- Each log winner meets only the *first* base row of its key: hudi 0.5.0 and Java key the log records by
  record key and take the record out of the buffer at that row, so further base rows of the key (a file group
  holding a key twice) pass through unchanged.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.config.properties import COMMIT_TIME_ORDERING, EVENT_TIME_ORDERING

RECORD_KEY = "_hoodie_record_key"


@dataclass
class DataItem:
    """Rows of one data block, in log order."""

    records: pa.Table


@dataclass
class DeleteItem:
    """Deletes of one delete block: record_key, ordering_value, always_wins."""

    keys: pa.Array
    ordering: pa.Array
    always_wins: pa.Array
    instant: str | None = None   # the block's instant: where a delete's event time comes from when known
    event_ms: pa.Array | None = None   # each delete's event time (epoch ms; null: unknown), when the block has them


LogItem = DataItem | DeleteItem
_Takeable = TypeVar("_Takeable", pa.Array, pa.Table)


@dataclass
class LogWinners:
    """One winner per record key among a slice's logs."""

    keys: pa.Array            # string, unique
    rows: pa.Table            # data columns of each key's winner (undefined row when it is a delete)
    is_delete: np.ndarray     # bool per key
    ordering: pa.Array | None # ordering value of each winner (EVENT_TIME only)
    kills_base: np.ndarray    # bool per key: the winner is a processing-time delete, so the base row loses
    entries: np.ndarray | None = None   # each winner's position among the merged items' records and deletes

    @property
    def size(self) -> int:
        return len(self.keys)


def _comparable(values: pa.Array) -> pa.Array:
    """Map ordering values to a type that compares across sources (int32 vs LongWrapper, ts vs long)."""
    t = values.type
    if pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_time(t):
        return values.cast(pa.int64())
    if pa.types.is_integer(t) or pa.types.is_boolean(t):
        return values.cast(pa.int64())
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        return values.cast(pa.float64())
    if pa.types.is_null(t):
        return values.cast(pa.int64())
    return values.cast(pa.string())


def _concat(arrays: Sequence[pa.Array]) -> pa.Array:
    chunks = [a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in arrays]
    types = {c.type for c in chunks if not pa.types.is_null(c.type)}
    if len(types) > 1:
        # Mixed ordering types (e.g. int data, string deletes) compare as strings rather than fail.
        chunks = [c.cast(pa.string()) for c in chunks]
    elif types:
        target = types.pop()
        chunks = [c.cast(target) for c in chunks]
    return pa.concat_arrays(chunks) if chunks else pa.array([], pa.string())


def _empty_winners(schema: pa.Schema) -> LogWinners:
    return LogWinners(pa.array([], pa.string()), schema.empty_table(), np.zeros(0, bool), None, np.zeros(0, bool),
                      np.zeros(0, np.int64))


def merge_log_items(items: Iterable[LogItem], merge_mode: str, ordering_field: str | None,
                    schema: pa.Schema) -> LogWinners:
    """Fold log blocks (given in log order) into one winner per key."""
    keys, ords, dels, hard, tables = [], [], [], [], []
    row_src: list[np.ndarray] = []
    offset = 0
    for item in items:
        if isinstance(item, DataItem):
            t = item.records
            n = t.num_rows
            keys.append(t.column(RECORD_KEY))
            ords.append(_ordering_of(t, ordering_field, merge_mode))
            tables.append(t)
            row_src.append(np.arange(offset, offset + n))
            offset += n
            dels.append(np.zeros(n, bool))
            hard.append(np.zeros(n, bool))
        else:
            n = len(item.keys)
            keys.append(item.keys)
            ords.append(_comparable(item.ordering) if merge_mode == EVENT_TIME_ORDERING else pa.nulls(n, pa.int64()))
            row_src.append(np.full(n, -1))
            dels.append(np.ones(n, bool))
            hard.append(np.asarray(item.always_wins.to_numpy(zero_copy_only=False), bool)
                        if merge_mode == EVENT_TIME_ORDERING else np.zeros(n, bool))
    if not keys:
        return _empty_winners(schema)
    all_keys = _concat(keys)
    src = np.concatenate(row_src)
    is_del = np.concatenate(dels)
    is_hard = np.concatenate(hard)
    seq = np.arange(len(all_keys))
    encoded = pc.dictionary_encode(all_keys)
    # Every key once in the logs (upserts of distinct keys, the common case): each entry is its key's only
    # candidate, so it wins under either rule, and a processing-time delete among them kills the base row.
    # The fold's sorts (ordering ranks, lexsort by key) would find exactly that.
    distinct = len(encoded.dictionary) == len(all_keys)
    key_codes = encoded.indices.to_numpy(zero_copy_only=False)
    if merge_mode == EVENT_TIME_ORDERING:
        order_arr = _concat(ords)
        winner, kills = ((seq, is_hard.copy()) if distinct
                         else _event_time_winners(key_codes, seq, order_arr, is_hard, is_del))
        ordering = _take(order_arr, winner)
    else:
        winner = seq if distinct else _last_per_key(key_codes, seq)
        kills = np.zeros(len(winner), bool)
        ordering = None
    data = pa.concat_tables([conform_to_schema(t, schema) for t in tables]) if tables else schema.empty_table()
    rows_idx = src[winner]
    if data.num_rows:
        rows = _take(data, np.where(rows_idx < 0, 0, rows_idx))  # delete winners get a dummy row
    else:
        rows = _null_rows(schema, len(winner))
    return LogWinners(_take(all_keys, winner), rows, is_del[winner], ordering, kills, np.asarray(winner))


def _take(values: _Takeable, idx: np.ndarray) -> _Takeable:
    """values.take(idx), without the copy when idx takes every row in order (logs whose keys are all distinct,
    the common case of upserts of new or distinct keys)."""
    if len(idx) == len(values) and (len(idx) == 0 or (idx[0] == 0 and bool((np.diff(idx) == 1).all()))):
        return values
    return values.take(pa.array(idx))


def _null_rows(schema: pa.Schema, n: int) -> pa.Table:
    return pa.table({f.name: pa.nulls(n, f.type) for f in schema}, schema=schema)


def _ordering_of(t: pa.Table, ordering_field: str | None, merge_mode: str) -> pa.Array:
    if merge_mode != EVENT_TIME_ORDERING or not ordering_field or ordering_field not in t.column_names:
        return pa.nulls(t.num_rows, pa.int64())
    return _comparable(t.column(ordering_field).combine_chunks())


def _last_per_key(key_codes: np.ndarray, seq: np.ndarray) -> np.ndarray:
    """Index of the last occurrence of each key (commit-time ordering)."""
    order = np.lexsort((seq, key_codes))
    sorted_keys = key_codes[order]
    last = np.ones(len(order), bool)
    last[:-1] = sorted_keys[1:] != sorted_keys[:-1]
    return np.sort(order[last])


def _event_time_winners(key_codes: np.ndarray, seq: np.ndarray, ordering: pa.Array,
                        is_hard: np.ndarray, is_del: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The left fold of the event-time rules per key, vectorised: (winner index per key, winner is a
    processing-time delete).

    Only the last processing-time delete h of a key matters (it replaces whatever came before). After h,
    deletes with an ordering value are ignored until the first record f; from f on, the greatest ordering
    wins, ties to the later. A key whose h has no record after it keeps h as its winner.
    """
    n_keys = int(key_codes.max()) + 1 if len(key_codes) else 0
    last_hard = np.full(n_keys, -1)
    if is_hard.any():
        np.maximum.at(last_hard, key_codes[is_hard], seq[is_hard])
    h = last_hard[key_codes]
    first_data = np.full(n_keys, np.iinfo(np.int64).max)
    data_after = ~is_del & (seq > h)
    if data_after.any():
        np.minimum.at(first_data, key_codes[data_after], seq[data_after])
    f = first_data[key_codes]
    eligible = (seq > h) & (~is_del | (h < 0) | (seq > f))
    # Dense ranks make any comparable type (ints, floats, strings) sortable in numpy; nulls rank lowest.
    rank = pc.rank(ordering, sort_keys=[("", "ascending", "at_start")], tiebreaker="dense").to_numpy()
    rank = rank.astype(np.int64)
    idx = np.nonzero(eligible)[0]
    order = idx[np.lexsort((seq[idx], rank[idx], key_codes[idx]))]
    sorted_keys = key_codes[order]
    last = np.ones(len(order), bool)
    last[:-1] = sorted_keys[1:] != sorted_keys[:-1]
    winners = order[last]
    # Keys with nothing eligible: their last processing-time delete wins.
    has_winner = np.zeros(n_keys, bool)
    has_winner[key_codes[winners]] = True
    orphan_keys = np.nonzero(~has_winner)[0]
    winners = np.sort(np.concatenate([winners, last_hard[orphan_keys]]))
    return winners, is_hard[winners]


def conform_to_schema(t: pa.Table, schema: pa.Schema) -> pa.Table:
    """Project/cast a block's rows onto the slice's read schema (schema evolution: missing -> null)."""
    cols = []
    for f in schema:
        if f.name in t.column_names:
            col = t.column(f.name)
            cols.append(col if col.type == f.type else col.cast(f.type))
        else:
            cols.append(pa.nulls(t.num_rows, f.type))
    return pa.Table.from_arrays(cols, schema=schema)


@dataclass
class BaseResolution:
    kept: pa.Table              # base rows that survive, in base order


class BaseMerge:
    """Phase 2, batch by batch in base-file order: each log winner meets the first base row of its key.

    What a winner met is remembered across batches: a base row of a key already met passes through unchanged
    (a file group holding a key twice keeps its second row, as hudi 0.5.0 does)."""

    def __init__(self, winners: LogWinners, merge_mode: str, ordering_field: str | None, schema: pa.Schema) -> None:
        self.winners, self.merge_mode, self.ordering_field, self.schema = winners, merge_mode, ordering_field, schema
        self.met = np.zeros(winners.size, bool)
        # Not emitted by `rest`: a base row beat it (event time).
        self.settled = np.zeros(winners.size, bool)

    def resolve(self, batch: pa.Table) -> BaseResolution:
        """One batch of base rows against the log winners."""
        w = self.winners
        if w.size == 0 or batch.num_rows == 0:
            return BaseResolution(conform_to_schema(batch, self.schema))
        match = pc.index_in(batch.column(RECORD_KEY), value_set=w.keys)
        idx = np.asarray(match.fill_null(0).to_numpy(zero_copy_only=False), np.int64)
        has = self._first_meetings(np.asarray(match.is_valid().to_numpy(zero_copy_only=False), bool), idx)
        self.met[idx[has]] = True
        log_wins = has & self._log_wins(batch, idx) if self.merge_mode == EVENT_TIME_ORDERING else has
        self.settled[idx[has & ~log_wins]] = True
        kept = batch.filter(pa.array(~log_wins)) if log_wins.any() else batch  # no copy when nothing is replaced
        return BaseResolution(conform_to_schema(kept, self.schema))

    def rest(self) -> pa.Table:
        """Log winners to emit after the base: not deletes and not beaten by a base row."""
        return self.winners.rows.filter(pa.array(~self.winners.is_delete & ~self.settled))

    def _first_meetings(self, has: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """`has` narrowed to the first row of each winner's key not met in an earlier batch."""
        has = has & ~self.met[idx]
        rows = np.nonzero(has)[0]
        _, first = np.unique(idx[rows], return_index=True)
        if len(first) == len(rows):
            return has
        out = np.zeros(len(has), bool)
        out[rows[first]] = True
        return out

    def _log_wins(self, batch: pa.Table, idx: np.ndarray) -> np.ndarray:
        """Event time: whether each row's winner beats it (a processing-time delete, or ordering ≥ the base's)."""
        w = self.winners
        base_ord = _ordering_of(batch, self.ordering_field, self.merge_mode)
        assert w.ordering is not None, "event-time winners carry their ordering (merge_log_items)"
        log_ord = w.ordering.take(pa.array(idx))
        log_ge = np.asarray(pc.fill_null(pc.greater_equal(_concat([log_ord]), _concat([base_ord])), True)
                            .to_numpy(zero_copy_only=False), bool)
        out: np.ndarray = w.kills_base[idx] | log_ge
        return out


def merge_slice(base_batches: Iterable[pa.Table], items: Sequence[LogItem], merge_mode: str,
                ordering_field: str | None, schema: pa.Schema) -> Iterable[pa.Table]:
    """Stream the merged rows of a slice: surviving base rows batch by batch, then the log winners."""
    if merge_mode not in (EVENT_TIME_ORDERING, COMMIT_TIME_ORDERING):
        raise ValueError(f"unknown merge mode {merge_mode}")
    winners = merge_log_items(items, merge_mode, ordering_field, schema)
    return merge_with_winners(base_batches, winners, merge_mode, ordering_field, schema)


def merge_with_winners(base_batches: Iterable[pa.Table], winners: LogWinners, merge_mode: str,
                       ordering_field: str | None, schema: pa.Schema) -> Iterator[pa.Table]:
    """Phase 2 alone, for callers that size the base batches by the number of winners."""
    merge = BaseMerge(winners, merge_mode, ordering_field, schema)
    for batch in base_batches:
        kept = merge.resolve(batch).kept
        del batch  # only one base batch alive at a time
        if kept.num_rows:
            yield kept
        del kept
    rest = merge.rest()
    if rest.num_rows:
        yield rest


def base_batch_rows(winners: int) -> int:
    """Rows per base batch: small batches bound memory, but each batch rebuilds the hash set of the
    winners' keys, so with many winners the batch grows with them."""
    return max(262_144, winners)
