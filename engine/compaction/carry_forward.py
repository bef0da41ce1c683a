"""The carry-forward log: what a compaction writes as log version 1 of the new slice C.

A compaction folds a prefix P of a slice's logs into a new base; the rest R (carried over) and the logs
written into slice C while the plan was pending follow in the new slice. Hudi's merge is a left fold over
the logs (docs/ARCHITECTURE.md, "Merge rules") whose state a base file cannot always hold: it has no
tombstones, and it cannot say "deleted, unless a later record comes". So P is split into the log winners
that go into the new base and the items replayed, in order, by log version 1 of slice C, ahead of every
carried log:
1. a delete that won in P while a later record of lower ordering would otherwise undo it (issue 9 case 1:
   put 10, delete 30, put 20 stays deleted). The delete is applied to the base *and* carried.
2. a winner whose key meets a processing-time delete later, or that is one and meets a later record: Hudi
   lets the old base row compete with a record written after such a delete, so the old base row stays as
   it is and the winner is carried instead.
3. exact mode: every record and delete of P with event time > T that a later as-of view may still need,
   in log order — not only the final winner — minus those a later item with event time ≤ T always beats.
Under commit-time ordering only 3 applies: logs always beat the base, and a key's kept late items all
come after its ≤ T items in log order, so replaying them after the base reproduces the fold.
Partial updates (IS_PARTIAL records) replace 1 and 2, under either ordering: hudi's fold of them is no fold of a
base row and a winner (a losing partial record fills what the winner lacks, but only among log records; one
after a delete takes the base row's other columns), so every winner whose key meets a following record is
withheld: the old base row stays and the winner — the fold's state after P, a partial record when it lacks
columns — is replayed first, which the fold of what follows continues exactly as it would have.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.config import eventtime
from engine.config.properties import EVENT_TIME_ORDERING
from engine.io import base_format
from engine.read.merge import (
    RECORD_KEY,
    DataItem,
    DeleteItem,
    LogItem,
    LogWinners,
    _comparable,
    _concat,
    _ordering_of,
    conform_to_schema,
    merge_log_items,
)


@dataclass(frozen=True)
class SplitSpec:
    merge_mode: str
    ordering_field: str | None
    event_field: str | None
    schema: pa.Schema                                   # read schema, meta fields first
    threshold_ms: int | None = None                     # exact mode: items with event time > T are kept out
    delete_bounds: Mapping[str, tuple[int | None, int | None]] | None = None  # instant -> its deletes' event times


@dataclass
class SliceSplit:
    base_winners: LogWinners      # what the new base folds in
    carry: list[LogItem]          # log version 1 of slice C, in replay order
    carry_min_event_ms: int | None  # smallest event time carried that the new base does not reflect


@dataclass
class _Flat:
    """One entry per record or delete of a list of items, in log order."""

    keys: pa.Array
    ordering: pa.Array
    is_del: np.ndarray
    is_hard: np.ndarray
    offsets: np.ndarray   # start of each item in the flat arrays (len = items + 1)


def _flatten(items: Sequence[LogItem], spec: SplitSpec) -> _Flat:
    keys, ords, dels, hard, sizes = [], [], [], [], [0]
    for item in items:
        if isinstance(item, DataItem):
            n = item.records.num_rows
            keys.append(item.records.column(RECORD_KEY).combine_chunks())
            ords.append(_ordering_of(item.records, spec.ordering_field, spec.merge_mode))
            dels.append(np.zeros(n, bool))
            hard.append(np.zeros(n, bool))
        else:
            n = len(item.keys)
            keys.append(item.keys)
            ords.append(_comparable(item.ordering) if spec.merge_mode == EVENT_TIME_ORDERING
                        else pa.nulls(n, pa.int64()))
            dels.append(np.ones(n, bool))
            hard.append(np.asarray(item.always_wins.to_numpy(zero_copy_only=False), bool))
        sizes.append(n)
    if not keys:
        empty = np.zeros(0, bool)
        return _Flat(pa.array([], pa.string()), pa.array([], pa.int64()), empty, empty, np.zeros(1, np.int64))
    return _Flat(_concat(keys).cast(pa.string()), _concat(ords), np.concatenate(dels), np.concatenate(hard),
                 np.cumsum(sizes))


def _ranks(values: pa.Array) -> np.ndarray:
    """Dense ranks (nulls lowest), so orderings of any comparable type compare in numpy."""
    if len(values) == 0:
        return np.zeros(0, np.int64)
    ranks: np.ndarray = pc.rank(values, sort_keys=[("", "ascending", "at_start")], tiebreaker="dense").to_numpy()
    return ranks.astype(np.int64)


def _select(items: Sequence[LogItem], flat: _Flat, mask: np.ndarray, et: np.ndarray | None = None) -> list[LogItem]:
    """The items restricted to the masked entries, in order; empty items dropped. With `et`, deletes take
    those event times (as exact mode judged them), so the carry-forward log keeps them for the next cut."""
    out: list[LogItem] = []
    for i, item in enumerate(items):
        lo, hi = flat.offsets[i], flat.offsets[i + 1]
        m = mask[lo:hi]
        if not m.any():
            continue
        if isinstance(item, DataItem):
            out.append(item if m.all() else DataItem(item.records.filter(pa.array(m)), item.partial))
            continue
        keep = pa.array(m)
        event_ms = item.event_ms
        if et is not None:
            times = et[lo:hi]
            event_ms = pa.array(np.nan_to_num(times).astype(np.int64), pa.int64(), mask=np.isnan(times))
        out.append(DeleteItem(item.keys.filter(keep), item.ordering.filter(keep), item.always_wins.filter(keep),
                              item.instant, None if event_ms is None else event_ms.filter(keep)))
    return out


# ------------------------------------------------------------------------------------ event times

def _event_ms(items: Sequence[LogItem], spec: SplitSpec) -> tuple[np.ndarray, np.ndarray]:
    """(event time, earliest it can be) in epoch ms per entry; NaN when unknown. They differ only for a delete
    whose write straddles T: judged after T (its write's max), though it may be as early as the write's min —
    what the published completion time must not claim past."""
    parts, earliest = [], []
    for item in items:
        if isinstance(item, DataItem):
            t = item.records
            et = (eventtime.millis_array(t.column(spec.event_field)) if spec.event_field in t.column_names
                  else np.full(t.num_rows, np.nan))
            parts.append(et)
            earliest.append(et)
        else:
            et, low = _delete_event_ms(item, spec)
            parts.append(et)
            earliest.append(low)
    if not parts:
        return np.zeros(0), np.zeros(0)
    return np.concatenate(parts), np.concatenate(earliest)


def _delete_event_ms(item: DeleteItem, spec: SplitSpec) -> tuple[np.ndarray, np.ndarray]:
    """Each delete's event time, from the first source that knows it:
    1. its own, written with the block (EVENT_TIMES_ATTR: Tidemark's deletes whose input had event times);
    2. its ordering value, when the ordering field is the event-time field (and it is not a processing-time 0);
    3. the bounds of its write (older blocks): all ≤ T or all > T when they say so; when they straddle T the
       delete counts as after T (spilled, applied by a later compaction), never as before — applying it now
       could delete a row the RO view must still hold;
    4. unknown (NaN) when nothing tells: no event time was ever given, so it is applied at once, as in Java.
    """
    n = len(item.keys)
    out = np.full(n, np.nan)
    if (spec.event_field and spec.event_field == spec.ordering_field and spec.event_field in spec.schema.names
            and not pa.types.is_null(item.ordering.type)):
        out = _ordering_as_event_ms(item.ordering, spec.schema.field(spec.event_field).type)
        out[np.asarray(item.always_wins.to_numpy(zero_copy_only=False), bool)] = np.nan
    if item.event_ms is not None and item.event_ms.null_count < n:
        own = np.asarray(item.event_ms.is_valid().to_numpy(zero_copy_only=False), bool)
        out[own] = item.event_ms.filter(item.event_ms.is_valid()).to_numpy().astype(np.float64)
    lo, hi = (spec.delete_bounds or {}).get(item.instant or "", (None, None))
    t = spec.threshold_ms
    earliest = out.copy()
    unknown = np.isnan(out)
    if t is not None and hi is not None and hi <= t:
        out[unknown] = earliest[unknown] = t
    elif t is not None and hi is not None:
        out[unknown] = hi if lo is None or lo <= t else lo   # straddling T: after T, as late as it may be
        earliest[unknown] = lo if lo is not None else hi
    return out, earliest


def _ordering_as_event_ms(ordering: pa.Array, field_type: pa.DataType) -> np.ndarray:
    """A delete's raw ordering value (the data's Avro value: e.g. micros for timestamp-micros) as millis."""
    values = ordering
    try:
        if pa.types.is_timestamp(field_type) and not pa.types.is_timestamp(values.type):
            values = values.cast(pa.int64()).cast(field_type)
        elif values.type != field_type:
            values = values.cast(field_type)
        return eventtime.millis_array(values)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError):
        return np.full(len(ordering), np.nan)


# ------------------------------------------------------------------------------------ the split

def _undominated(flat: _Flat, late: np.ndarray, merge_mode: str, codes: np.ndarray) -> np.ndarray:
    """Late entries (event time > T) that a later on-time entry of the same key does not make irrelevant.

    A later on-time entry y is in every as-of view that contains a late entry x, so x can be dropped when the
    fold's state after y does not depend on x: under commit time any later y makes it so; under event time a
    processing-time delete y always does (it resets the fold), and a y whose ordering is ≥ x's does only when
    the key has no processing-time delete among these entries — after one, a record ends the "ignore ordered
    deletes" state and an ordered delete is ignored, so x (a record, or a processing-time delete) still decides
    what y does.
    """
    n = len(late)
    if not late.any():
        return late
    rank = _ranks(flat.ordering)
    top = int(rank.max(initial=0)) + 1
    key_hard = np.zeros(int(codes.max(initial=-1)) + 1, bool)
    key_hard[codes[flat.is_hard]] = True
    by_order = np.where(key_hard[codes], -1, rank)    # -1: beats nothing by ordering
    strength = np.where(flat.is_hard | (merge_mode != EVENT_TIME_ORDERING), top, by_order)
    value = np.where(~late, strength + 1, 0)          # 0: no on-time entry; on-time entries 1..top+1
    order = np.lexsort((-np.arange(n), codes))        # per key, latest first
    span = top + 2
    shifted = value[order] + codes[order] * span
    running = np.maximum.accumulate(shifted) - codes[order] * span
    after = np.zeros(n, np.int64)                     # best on-time entry strictly after each entry
    same = codes[order][1:] == codes[order][:-1]
    after[order[1:]] = np.where(same, running[:-1], 0)
    needed = rank + 1 if merge_mode == EVENT_TIME_ORDERING else np.ones(n, np.int64)
    ignored = _ignored_deletes(flat, codes) if merge_mode == EVENT_TIME_ORDERING else np.zeros(n, bool)
    kept: np.ndarray = late & ~(after >= np.maximum(needed, 1)) & ~ignored
    return kept


def _ignored_deletes(flat: _Flat, codes: np.ndarray) -> np.ndarray:
    """Ordered deletes that follow a processing-time delete of their key with no record in between: the fold
    ignores them whatever comes later, so they never matter — replayed alone after the new base they would
    (the carry-forward log does not hold the processing-time delete that made them ignored)."""
    n = len(codes)
    if not flat.is_hard.any():
        return np.zeros(n, bool)
    order = np.lexsort((np.arange(n), codes))         # per key, log order
    span = n + 1
    offset = codes[order] * span

    def last(flag: np.ndarray) -> np.ndarray:        # latest flagged position up to each entry, per key
        value = np.where(flag[order], np.arange(n), -1) + offset
        out = np.empty(n, np.int64)
        out[order] = np.maximum.accumulate(value) - offset
        return out

    ignored: np.ndarray = flat.is_del & ~flat.is_hard & (last(flat.is_hard) > last(~flat.is_del))
    return ignored


def _following(kept_late: np.ndarray, late: np.ndarray, codes: np.ndarray, is_hard: np.ndarray) -> np.ndarray:
    """On-time entries after a kept late entry of a key with a processing-time delete among them: replayed
    after it too, in log order, so the carry-forward log folds that key's items in their original order (they
    also count for the new base). Without one, the fold is order-free once dominated items are dropped (the
    greatest ordering wins), so nothing more is replayed."""
    if not kept_late.any() or not is_hard.any():
        return np.zeros(len(late), bool)
    seq = np.arange(len(late))
    first = np.full(int(codes.max()) + 1, np.iinfo(np.int64).max)
    np.minimum.at(first, codes[kept_late], seq[kept_late])
    key_hard = np.zeros(len(first), bool)
    key_hard[codes[is_hard]] = True
    following: np.ndarray = ~late & (seq > first[codes]) & key_hard[codes]
    return following


@dataclass
class _Rest:
    """Per key of the items that will follow the carry-forward log."""

    keys: pa.Array
    has_data: np.ndarray
    data_ordering: pa.Array   # ordering of every record that follows...
    data_key: np.ndarray      # ...its key index...
    after_hard: np.ndarray    # ...and whether a processing-time delete of its key precedes it


def _rest(items: Sequence[LogItem], spec: SplitSpec) -> _Rest:
    flat = _flatten(items, spec)
    enc = pc.dictionary_encode(flat.keys)
    keys = enc.dictionary
    codes = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    seq = np.arange(len(codes))
    first_hard = np.full(len(keys), np.iinfo(np.int64).max)
    if flat.is_hard.any():
        np.minimum.at(first_hard, codes[flat.is_hard], seq[flat.is_hard])
    data = ~flat.is_del
    has_data = np.zeros(len(keys), bool)
    has_data[codes[data]] = True
    return _Rest(keys, has_data, flat.ordering.filter(pa.array(data)), codes[data],
                 seq[data] > first_hard[codes[data]])


BaseOrdering = Callable[[pa.Array], tuple[pa.Array, pa.Array]]   # keys -> (keys found in the base, ordering)
BaseTwice = Callable[[pa.Array], pa.Array]   # keys -> those of them the base holds more than once


def _carry_decisions(winners: LogWinners, rest: _Rest, base_ordering: BaseOrdering | None) -> tuple[np.ndarray, np.ndarray]:
    """(withhold, carry) per winner: withheld winners leave the base row as it is and are carried;
    carried winners are applied to the base and replayed too.

    After a processing-time delete, Hudi lets a record compete with the *base* row by ordering (the delete
    is forgotten), so a winner that changed the base would change that contest:
    - a record or ordered delete is withheld when a record of lower ordering follows a processing-time
      delete (that record would have met the old base row);
    - a processing-time delete is withheld when the old base row beats a following record; otherwise it
      is applied and replayed (after it, ordered deletes are ignored until a record comes).
    An ordered delete that is applied is replayed when a following record of lower ordering would undo it.
    """
    n = winners.size
    nothing = np.zeros(n, bool)
    if len(rest.keys) == 0:
        return nothing, nothing
    match = pc.index_in(winners.keys, value_set=rest.keys)
    has = np.asarray(match.is_valid().to_numpy(zero_copy_only=False), bool)
    j = np.asarray(match.fill_null(0).to_numpy(zero_copy_only=False), np.int64)
    if not (has & rest.has_data[j]).any():
        return nothing, nothing
    hard = winners.kills_base
    base_keys, base_ord = pa.array([], pa.string()), pa.array([], pa.int64())
    if base_ordering is not None and (has & hard).any():
        base_keys, base_ord = base_ordering(winners.keys.filter(pa.array(has & hard)))
    # One dense ranking over every ordering involved, so they compare whatever their types.
    joint = _ranks(_concat([winners.ordering, rest.data_ordering, base_ord]))
    w_rank, r_rank, b_rank = joint[:n], joint[n:n + len(rest.data_key)], joint[n + len(rest.data_key):]
    big = np.iinfo(np.int64).max
    low = np.full(len(rest.keys), big)
    low_after_hard = np.full(len(rest.keys), big)
    if len(rest.data_key):
        np.minimum.at(low, rest.data_key, r_rank)
        np.minimum.at(low_after_hard, rest.data_key[rest.after_hard], r_rank[rest.after_hard])
    in_base = pc.index_in(winners.keys, value_set=base_keys)
    base_rank = np.full(n, -1 if base_ordering is not None else big)   # unknown base: assume it wins
    found = np.asarray(in_base.is_valid().to_numpy(zero_copy_only=False), bool)
    base_rank[found] = b_rank[np.asarray(in_base.filter(in_base.is_valid()).to_numpy(zero_copy_only=False), np.int64)]
    followed = has & rest.has_data[j]
    withhold = np.where(hard, followed & (base_rank > low[j]), has & (low_after_hard[j] < w_rank))
    carry = ~withhold & np.where(hard, followed, followed & winners.is_delete & (low[j] < w_rank))
    return withhold, carry


def _winner_items(winners: LogWinners, mask: np.ndarray, event_ms: np.ndarray,
                  ordering_field: str | None) -> list[LogItem]:
    """Winners as log items (`event_ms`: each winner's event time, NaN unknown, kept on its delete)."""
    out: list[LogItem] = _data_winner_items(winners, mask & ~winners.is_delete, ordering_field)
    for hard in (True, False):
        dels = mask & winners.is_delete & (winners.kills_base == hard)
        if dels.any():
            keep = pa.array(dels)
            ordering = (pa.nulls(int(dels.sum()), pa.int64()) if hard or winners.ordering is None
                        else winners.ordering.filter(keep))
            times = event_ms[dels]
            out.append(DeleteItem(winners.keys.filter(keep), ordering, pa.repeat(pa.scalar(hard), int(dels.sum())),
                                  event_ms=pa.array(np.nan_to_num(times).astype(np.int64), pa.int64(),
                                                    mask=np.isnan(times))))
    return out


def _data_winner_items(winners: LogWinners, data: np.ndarray, ordering_field: str | None) -> list[LogItem]:
    """Record winners as data items: one of full records, and one partial item per set of columns lacking
    (a winner of partial updates that no log record gave some columns: replayed, those stay the base row's).

    A winner without an ordering value (an unordered partial record won last) whose row still holds the
    ordering field — an earlier record's — is followed by its row again without that field: replayed alone its
    row would compete with that value, the pair leaves the fold where it was (the values, and no ordering)."""
    if not data.any():
        return []
    names = list(winners.absent)
    lacking = np.stack([winners.absent[n] for n in names]) if names else np.zeros((0, winners.size), bool)
    unordered = winners.unordered if winners.unordered is not None else np.zeros(winners.size, bool)
    out: list[LogItem] = []
    tails: list[LogItem] = []
    for signature in np.unique(lacking[:, data], axis=1).T:
        rows = data & (lacking == signature[:, None]).all(axis=0)
        dropped = {n for n, gone in zip(names, signature) if gone}
        keep = [c for c in winners.rows.column_names if c not in dropped]
        out.append(DataItem(winners.rows.filter(pa.array(rows)).select(keep), bool(dropped)))
        tail = rows & unordered
        if tail.any() and ordering_field in keep:
            tails.append(DataItem(winners.rows.filter(pa.array(tail)).select([c for c in keep if c != ordering_field]),
                                  True))
    return out + tails


def _without(winners: LogWinners, drop: np.ndarray) -> LogWinners:
    if not drop.any():
        return winners
    keep = pa.array(~drop)
    return LogWinners(winners.keys.filter(keep), winners.rows.filter(keep), winners.is_delete[~drop],
                      winners.ordering.filter(keep) if winners.ordering is not None else None,
                      winners.kills_base[~drop], None if winners.entries is None else winners.entries[~drop],
                      {name: mask[~drop] for name, mask in winners.absent.items()},
                      None if winners.unordered is None else winners.unordered[~drop])


def _any_partial(items: Sequence[LogItem]) -> bool:
    return any(isinstance(i, DataItem) and i.partial for i in items)


def _met_later(winners: LogWinners, following: Sequence[LogItem], spec: SplitSpec) -> np.ndarray:
    """Per winner: a record or delete of its key follows (the module doc: withheld under partial updates)."""
    keys = _flatten(following, spec).keys
    if winners.size == 0 or len(keys) == 0:
        return np.zeros(winners.size, bool)
    met: np.ndarray = np.asarray(pc.is_in(winners.keys, value_set=keys).to_numpy(zero_copy_only=False), bool)
    return met


def _decisions(winners: LogWinners, items: Sequence[LogItem], following: Sequence[LogItem], spec: SplitSpec,
               base_ordering: BaseOrdering | None, base_twice: BaseTwice | None) -> tuple[np.ndarray, np.ndarray]:
    """(withhold, carry) per winner (_carry_decisions); only winners whose key something follows can need either.

    A key the old base holds twice is withheld too: a winner meets only the first base row of its key, so folded
    into the base it would leave the second as the row what follows meets — it met none before."""
    none = np.zeros(winners.size, bool)
    met = _met_later(winners, following, spec)
    if not met.any():
        return none, none
    if _any_partial(items) or _any_partial(following):
        withhold, carry = met, none
    elif spec.merge_mode == EVENT_TIME_ORDERING:
        withhold, carry = _carry_decisions(winners, _rest(following, spec), base_ordering)
    else:
        withhold, carry = none, none
    if base_twice is not None:
        twice = met & np.asarray(pc.is_in(winners.keys, value_set=base_twice(winners.keys.filter(pa.array(met))))
                                 .to_numpy(zero_copy_only=False), bool)
        withhold, carry = withhold | twice, carry & ~twice
    return withhold, carry


def _min_ms(values: np.ndarray) -> int | None:
    known = values[~np.isnan(values)]
    return int(known.min()) if known.size else None


def split_slice(items: Sequence[LogItem], rest_items: Sequence[LogItem], spec: SplitSpec,
                base_ordering: BaseOrdering | None = None, base_twice: BaseTwice | None = None) -> SliceSplit:
    """Split the compacted logs' items into the new base's winners and the carry-forward items.

    `rest_items`: the items of the logs that follow in slice C (carried logs, writes made while the plan
    was pending), in order — only their keys, record orderings and processing-time deletes matter.
    `base_ordering`: the old base's ordering values of some keys (absent: assume the base row wins).
    `base_twice`: which of some keys the old base holds more than once (absent: assume none).
    """
    flat = _flatten(items, spec)
    threshold = spec.threshold_ms
    nan = np.full(len(flat.is_del), np.nan)
    et, earliest = _event_ms(items, spec) if threshold is not None else (nan, nan)
    late = (et > threshold) if threshold is not None else np.zeros(len(flat.is_del), bool)
    codes = pc.dictionary_encode(flat.keys).indices.to_numpy(zero_copy_only=False).astype(np.int64)
    kept_late = _undominated(flat, late, spec.merge_mode, codes)
    spill = _select(items, flat, kept_late | _following(kept_late, late, codes, flat.is_hard), et)
    winners = merge_log_items(_select(items, flat, ~late), spec.merge_mode, spec.ordering_field, spec.schema)
    spill_min = _min_ms(earliest[kept_late]) if kept_late.any() else None
    withhold, carry = _decisions(winners, items, [*spill, *rest_items], spec, base_ordering, base_twice)
    if not (withhold | carry).any():
        return SliceSplit(winners, spill, spill_min)
    on_time_et = et[~late]
    winner_et = (on_time_et[winners.entries] if winners.entries is not None and len(on_time_et)
                 else np.full(winners.size, np.nan))
    carried = _winner_items(winners, withhold | carry, winner_et, spec.ordering_field)
    withheld_min = None
    if withhold.any() and spec.event_field in winners.rows.column_names:
        withheld_min = _min_ms(eventtime.millis_array(winners.rows.column(spec.event_field).filter(
            pa.array(withhold & ~winners.is_delete))))
    mins = [m for m in (spill_min, withheld_min) if m is not None]
    return SliceSplit(_without(winners, withhold), carried + spill, min(mins) if mins else None)


def base_ordering_reader(base_file: str | None, ordering_field: str | None) -> BaseOrdering:
    """Looks up the ordering values of some keys in a base file (only the two columns are read)."""
    def lookup(keys: pa.Array) -> tuple[pa.Array, pa.Array]:
        if base_file is None:
            return pa.array([], pa.string()), pa.array([], pa.int64())
        columns = [RECORD_KEY] + ([ordering_field] if ordering_field else [])
        t = base_format.read_rows_of_keys(base_file, RECORD_KEY, columns, keys)
        ordering = (_comparable(t.column(ordering_field).combine_chunks()) if ordering_field in t.column_names
                    else pa.nulls(t.num_rows, pa.int64()))
        return t.column(RECORD_KEY).combine_chunks(), ordering
    return lookup


def base_twice_reader(base_file: str | None) -> BaseTwice:
    """Looks up which of some keys a base file holds more than once (only the key column is read, filtered)."""
    def lookup(keys: pa.Array) -> pa.Array:
        if base_file is None or len(keys) == 0:
            return pa.array([], pa.string())
        t = base_format.read_rows_of_keys(base_file, RECORD_KEY, [RECORD_KEY], keys)   # Parquet or Lance
        counts = pc.value_counts(t.column(RECORD_KEY).combine_chunks())
        twice: pa.Array = counts.field("values").filter(pc.greater(counts.field("counts"), 1))
        return twice
    return lookup


def carried_rows(item: DataItem, schema: pa.Schema) -> pa.Table:
    """A carried record block's rows in the slice's read schema (older blocks may lack new columns); a partial
    item's in its own columns of it, as the block it is written to holds only those."""
    if item.partial:
        schema = pa.schema([f for f in schema if f.name in item.records.column_names])
    return conform_to_schema(item.records, schema)
