"""The instant window of a time-travel or incremental read: which log blocks, base file and rows a slice
read keeps.

Runs on Spark executors with the slice reader, so it is a small picklable value.

- Time travel as of I (`begin` None, `end` I): log blocks of instants ≤ I, the base as it is (the view only
  offers slices whose base instant is ≤ I).
- Incremental (I1, I2] (`begin` I1, `end` I2), as Java Hudi and hudi 0.5.0 read it: merge what the commits in
  (I1, I2] wrote — the slice's base file when its instant is in the range, the log blocks of instants in the
  range — then keep the merged rows whose `_hoodie_commit_time` is in (I1, I2]. The row filter is what keeps
  a compaction from counting as a change: its base file and its carry-forward (spill) log keep every record's
  original commit time, while the logs it carried over keep their blocks' original instants.
- Table version 8 selects an incremental range by *completion* time (Java 1.x, hudi 0.5.0): the instants whose
  completion time is in (I1, I2] are given as `members`, and blocks, base and rows are kept by their (requested)
  instant being one of them.
"""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

COMMIT_TIME = "_hoodie_commit_time"


@dataclass(frozen=True)
class InstantWindow:
    end: str                      # the as-of instant, or the range's inclusive end
    begin: str | None = None      # the range's exclusive start (incremental only)
    # v8 incremental: the requested times of the instants that completed in (begin, end]; None: compare times
    members: frozenset[str] | None = None

    @property
    def incremental(self) -> bool:
        return self.begin is not None

    def in_range(self, instant: str) -> bool:
        if self.members is not None:
            return instant in self.members
        return instant <= self.end and (self.begin is None or instant > self.begin)

    def keeps_base(self, base_instant: str) -> bool:
        """Incremental reads take a base file only when the commit that wrote it is in the range."""
        return not self.incremental or self.in_range(base_instant)

    def filter_rows(self, table: pa.Table) -> pa.Table:
        """Incremental: only merged rows committed in (begin, end]; time travel: all rows. A row without a commit
        time (a table written without meta fields) cannot be placed: it is kept, as hudi 0.5.0 keeps it, since
        the base and blocks it came from were already chosen by the window."""
        if not self.incremental or COMMIT_TIME not in table.column_names or table.num_rows == 0:
            return table
        times = table.column(COMMIT_TIME)
        if self.members is not None:
            keep = pc.is_in(times, value_set=pa.array(sorted(self.members), pa.string()))
        else:
            keep = pc.and_(pc.greater(times, self.begin), pc.less_equal(times, self.end))
        return table.filter(pc.or_(pc.fill_null(keep, False), pc.is_null(times)))
