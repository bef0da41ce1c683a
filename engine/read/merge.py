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
- Partial updates (Hudi 1.x IS_PARTIAL blocks: records holding only the columns a write changed), as hudi 0.5.0's
  key-based buffer folds them: the winner is chosen exactly as above, column by column the value comes from
  - a winning record that carries the column (the latest such since the key's last winning delete), or else
  - the first record since then that carries it and either won or is partial (a partial record that loses
    still fills the columns the winner lacks; a full record that loses changes nothing);
  a column no log record supplies is the base row's when the log wins against it, else null.
- Each log winner meets only the *first* base row of its key: hudi 0.5.0 and Java key the log records by
  record key and take the record out of the buffer at that row, so further base rows of the key (a file group
  holding a key twice) pass through unchanged.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
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
    # A partial-update block's rows (IS_PARTIAL): they hold only its columns, and every other column keeps its
    # previous value (an older log record's, else the base row's) instead of becoming null.
    partial: bool = False


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
    # Partial updates: column -> bool per key, no log record supplied the column (null in `rows`), so it is the
    # base row's when the winner replaces one. Only columns some winner lacks; empty without partial blocks.
    absent: dict[str, np.ndarray] = field(default_factory=dict)
    # Partial updates under event time: bool per key, the winner is a partial record without the ordering field,
    # so hudi 0.5.0 gives the key no ordering value at all (whatever follows wins), whatever its row's value.
    unordered: np.ndarray | None = None

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


@dataclass
class _Entries:
    """The records and deletes of a slice's log items, one entry each, in log order."""

    keys: pa.Array
    key_codes: np.ndarray     # dense code of each entry's key
    ordering: pa.Array        # comparable ordering values (nulls under commit time)
    is_del: np.ndarray
    is_hard: np.ndarray       # processing-time deletes (event time only)
    src: np.ndarray           # each record's row in `data` (-1: a delete)
    data: pa.Table            # every record, conformed to the read schema
    # Partial updates only: records that lack the ordering field (hudi 0.5.0 gives them no ordering value, so
    # they win and whatever follows them wins), and the read schema's columns grouped by which entries carry
    # them (a full record carries all, a partial one its block's): per group, not per column, stays cheap.
    unordered: np.ndarray
    carried: list[tuple[list[str], np.ndarray]]


def merge_log_items(items: Iterable[LogItem], merge_mode: str, ordering_field: str | None,
                    schema: pa.Schema) -> LogWinners:
    """Fold log blocks (given in log order) into one winner per key."""
    items = list(items)
    if not items:
        return _empty_winners(schema)
    e = _entries(items, merge_mode, ordering_field, schema)
    if not len(e.keys):
        return _empty_winners(schema)
    seq = np.arange(len(e.keys))
    event_time = merge_mode == EVENT_TIME_ORDERING
    absent: dict[str, np.ndarray] = {}
    unordered = None
    if e.carried:
        wins = _prefix_winners(e) if event_time else np.ones(len(seq), bool)
        winner = _last_winners(e.key_codes, wins)
        rows, absent = _partial_rows(e, wins, winner, schema)
        kills, unordered = e.is_hard[winner], e.unordered[winner]
    else:
        # Every key once in the logs (upserts of distinct keys, the common case): each entry is its key's only
        # candidate, so it wins under either rule, and a processing-time delete among them kills the base row.
        # The fold's sorts (ordering ranks, lexsort by key) would find exactly that.
        distinct = int(e.key_codes.max(initial=-1)) + 1 == len(seq)
        if event_time:
            winner, kills = ((seq, e.is_hard.copy()) if distinct
                             else _event_time_winners(e.key_codes, seq, e.ordering, e.is_hard, e.is_del))
        else:
            winner = seq if distinct else _last_per_key(e.key_codes, seq)
            kills = np.zeros(len(winner), bool)
        rows = _winner_rows(e, winner, schema)
    ordering = _take(e.ordering, winner) if event_time else None
    return LogWinners(_take(e.keys, winner), rows, e.is_del[winner], ordering, kills, np.asarray(winner), absent,
                      unordered)


def _entries(items: Sequence[LogItem], merge_mode: str, ordering_field: str | None, schema: pa.Schema) -> _Entries:
    keys, ords, dels, hard, unordered, tables = [], [], [], [], [], []
    row_src: list[np.ndarray] = []
    offset = 0
    event_time = merge_mode == EVENT_TIME_ORDERING
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
            unordered.append(np.full(n, event_time and item.partial and ordering_field not in t.column_names))
        else:
            n = len(item.keys)
            keys.append(item.keys)
            ords.append(_comparable(item.ordering) if event_time else pa.nulls(n, pa.int64()))
            row_src.append(np.full(n, -1))
            dels.append(np.ones(n, bool))
            hard.append(np.asarray(item.always_wins.to_numpy(zero_copy_only=False), bool)
                        if event_time else np.zeros(n, bool))
            unordered.append(np.zeros(n, bool))
    all_keys = _concat(keys)
    data = pa.concat_tables([conform_to_schema(t, schema) for t in tables]) if tables else schema.empty_table()
    partial = any(isinstance(i, DataItem) and i.partial for i in items)
    return _Entries(all_keys, pc.dictionary_encode(all_keys).indices.to_numpy(zero_copy_only=False),
                    _concat(ords), np.concatenate(dels), np.concatenate(hard), np.concatenate(row_src), data,
                    np.concatenate(unordered), _entry_columns(items, schema) if partial else [])


def _winner_rows(e: _Entries, winner: np.ndarray, schema: pa.Schema) -> pa.Table:
    """The winners' records (delete winners get a dummy row)."""
    if not e.data.num_rows:
        return _null_rows(schema, len(winner))
    rows_idx = e.src[winner]
    return _take(e.data, np.where(rows_idx < 0, 0, rows_idx))


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


# ------------------------------------------------------------------------------------------- partial updates

def _entry_columns(items: Sequence[LogItem], schema: pa.Schema) -> list[tuple[list[str], np.ndarray]]:
    """The schema's columns grouped by the set of entries carrying them: (columns, bool per entry)."""
    sizes = [i.records.num_rows if isinstance(i, DataItem) else len(i.keys) for i in items]
    partial = [i for i in items if isinstance(i, DataItem) and i.partial]
    groups: dict[tuple[bool, ...], list[str]] = {}
    for name in schema.names:
        groups.setdefault(tuple(name in i.records.column_names for i in partial), []).append(name)
    out = []
    for signature, names in groups.items():
        carries = dict(zip(map(id, partial), signature))
        per_item = [isinstance(i, DataItem) and carries.get(id(i), True) for i in items]
        out.append((names, np.repeat(np.array(per_item, bool), sizes)))
    return out


def _by_key(key_codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(entries ordered per key in log order, where each key's run starts in that order)."""
    order = np.lexsort((np.arange(len(key_codes)), key_codes))
    keys = key_codes[order]
    return order, np.nonzero(np.r_[True, keys[1:] != keys[:-1]])[0]


def _prefix_winners(e: _Entries) -> np.ndarray:
    """Per entry, whether it becomes its key's winner when the event-time fold reaches it (the rules of the
    module doc, applied to every prefix): a processing-time delete always does, and after one, ordered deletes
    are ignored until a record comes; an unordered record always does, and so does whatever follows it;
    otherwise an entry wins when its ordering is ≥ that of every eligible entry before it since the key's
    last such reset (ties to the later)."""
    n = len(e.key_codes)
    order, key_starts = _by_key(e.key_codes)
    hard, dele, reset = e.is_hard[order], e.is_del[order], (e.is_hard | e.unordered)[order]
    pos = np.arange(n)
    first = np.zeros(n, bool)
    first[key_starts] = True
    starts = first | reset   # segments: a key's entries from its start, or from a reset, to the next
    seg = np.cumsum(starts) - 1
    seg_start = np.nonzero(starts)[0]
    first_data = np.minimum.reduceat(np.where(dele, n, pos), seg_start)[seg]
    eligible = ~reset & (~dele | ~hard[seg_start][seg] | (pos > first_data))
    rank = pc.rank(e.ordering, sort_keys=[("", "ascending", "at_start")], tiebreaker="dense").to_numpy()
    value = np.where(eligible, rank.astype(np.int64)[order], 0)   # ranks start at 1: 0 beats nothing
    span = int(value.max(initial=0)) + 1
    running = np.maximum.accumulate(value + seg * span) - seg * span
    before = np.zeros(n, np.int64)
    before[1:] = np.where(starts[1:], 0, running[:-1])
    wins = np.empty(n, bool)
    wins[order] = reset | (eligible & (value >= before))
    return wins


def _last_winners(key_codes: np.ndarray, wins: np.ndarray) -> np.ndarray:
    """Each key's last entry that won when the fold reached it: the key's winner, in log order."""
    order, starts = _by_key(key_codes)
    last = np.maximum.reduceat(np.where(wins[order], np.arange(len(order)), -1), starts)
    return np.sort(order[last])


def _partial_rows(e: _Entries, wins: np.ndarray, winner: np.ndarray,
                  schema: pa.Schema) -> tuple[pa.Table, dict[str, np.ndarray]]:
    """Each winner's row assembled column group by column group (module doc), and the columns it lacks."""
    n = len(e.key_codes)
    order, starts = _by_key(e.key_codes)
    pos = np.arange(n)
    key_start = starts[e.key_codes[order]]
    won, dele = wins[order], e.is_del[order]
    partial = np.zeros(n, bool)
    for _, carries in e.carried:
        partial |= ~carries & ~e.is_del   # a record missing some group is a partial one
    last_delete = np.maximum.reduceat(np.where(won & dele, pos, -1), starts)[e.key_codes[order]]
    since = np.maximum(last_delete, key_start - 1)   # entries after the key's last winning delete count
    first_win = np.minimum.reduceat(np.where(won & ~dele & (pos > since), pos, n), starts)[e.key_codes[order]]
    key = e.key_codes[winner]
    data_winner = ~e.is_del[winner]
    columns: dict[str, pa.Array] = {}
    absent: dict[str, np.ndarray] = {}
    for names, carries in e.carried:
        c = carries[order]
        first_fill = np.minimum.reduceat(np.where(c & (won | partial[order]) & (pos >= first_win), pos, n), starts)
        last_set = np.maximum.reduceat(np.where(c & won & (pos > since), pos, -1), starts)
        chosen = np.maximum(np.where(first_fill < n, first_fill, -1), last_set)[key]
        missing = (chosen < 0) | ~data_winner
        take = pa.array(np.where(missing, 0, e.src[order[np.maximum(chosen, 0)]]), pa.int64(), mask=missing)
        for name in names:
            columns[name] = e.data.column(name).take(take)
        if (missing & data_winner).any():
            absent.update(dict.fromkeys(names, missing & data_winner))
    return pa.Table.from_arrays([columns[f.name] for f in schema], schema=schema), absent


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
    overlaid: pa.Table | None   # partial log winners that beat their base row, its values filling their gaps


class BaseMerge:
    """Phase 2, batch by batch in base-file order: each log winner meets the first base row of its key.

    What a winner met is remembered across batches: a base row of a key already met passes through unchanged
    (a file group holding a key twice keeps its second row, as hudi 0.5.0 does)."""

    def __init__(self, winners: LogWinners, merge_mode: str, ordering_field: str | None, schema: pa.Schema) -> None:
        self.winners, self.merge_mode, self.ordering_field, self.schema = winners, merge_mode, ordering_field, schema
        self.met = np.zeros(winners.size, bool)
        # Not emitted by `rest`: a base row beat it (event time), or it was emitted overlaid on its base row.
        self.settled = np.zeros(winners.size, bool)

    def resolve(self, batch: pa.Table) -> BaseResolution:
        """One batch of base rows against the log winners."""
        w = self.winners
        if w.size == 0 or batch.num_rows == 0:
            return BaseResolution(conform_to_schema(batch, self.schema), None)
        match = pc.index_in(batch.column(RECORD_KEY), value_set=w.keys)
        idx = np.asarray(match.fill_null(0).to_numpy(zero_copy_only=False), np.int64)
        has = self._first_meetings(np.asarray(match.is_valid().to_numpy(zero_copy_only=False), bool), idx)
        self.met[idx[has]] = True
        log_wins = has & self._log_wins(batch, idx) if self.merge_mode == EVENT_TIME_ORDERING else has
        self.settled[idx[has & ~log_wins]] = True
        overlaid = self._overlay(batch, idx, log_wins)
        kept = batch.filter(pa.array(~log_wins)) if log_wins.any() else batch  # no copy when nothing is replaced
        return BaseResolution(conform_to_schema(kept, self.schema), overlaid)

    def rest(self) -> pa.Table:
        """Log winners to emit after the base: not deletes, not beaten by a base row, not emitted overlaid."""
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

    def _overlay(self, batch: pa.Table, idx: np.ndarray, log_wins: np.ndarray) -> pa.Table | None:
        """Partial winners that replace a base row, their absent columns taken from it (emitted now: the base
        row is at hand only while its batch is)."""
        w = self.winners
        if not w.absent:
            return None
        gaps = np.zeros(w.size, bool)
        for lacking in w.absent.values():
            gaps |= lacking
        rows = np.nonzero(log_wins & gaps[idx] & ~w.is_delete[idx])[0]
        if not len(rows):
            return None
        mine = idx[rows]
        self.settled[mine] = True
        out = w.rows.take(pa.array(mine))
        base = conform_to_schema(batch.take(pa.array(rows)), self.schema)
        for name, lacking in w.absent.items():
            i = out.schema.get_field_index(name)
            values = pc.if_else(pa.array(lacking[mine]), base.column(name), out.column(name))
            out = out.set_column(i, out.schema.field(i), values)
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
        res = merge.resolve(batch)
        del batch  # only one base batch alive at a time
        for part in (res.kept, res.overlaid):
            if part is not None and part.num_rows:
                yield part
        del res
    rest = merge.rest()
    if rest.num_rows:
        yield rest


def base_batch_rows(winners: int) -> int:
    """Rows per base batch: small batches bound memory, but each batch rebuilds the hash set of the
    winners' keys, so with many winners the batch grows with them."""
    return max(262_144, winners)
