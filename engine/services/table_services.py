"""The table services that follow a commit, as Java's write client runs them (`postCommit`): the automatic clean
(`hoodie.clean.automatic`, every `hoodie.clean.max.commits` commits, by the table's `hoodie.cleaner.policy`),
then archival of the active timeline (`hoodie.archive.automatic`).

They run after a write's deltacommit or a compaction's commit is published, each under the table lock taken anew
(the committing operation has released it), so a table that lives for a year keeps its file slices and its
active timeline bounded with nobody running `clean`. What they do is reported in the committing operation's
result (`services`), never raised: the commit already happened, and a service that fails or finds the lock busy
leaves work the next commit's services (or `recover`) finish — a clean interrupted after its plan is completed
by the next clean, an archival redone from the timeline it left.

`hoodie.clean.async` (Java's AsyncCleanerService): the clean starts on a thread when the write starts and the
write waits for it before returning, so the clean's deletes overlap the write's data phase.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TypeVar

from engine.config.properties import TableConfig, load_table_config
from engine.errors import Refused, TidemarkError
from engine.lock import TableLock
from engine.results import CleanResult, TableServicesResult
from engine.services.archive import run_archive
from engine.timeline.instants import CLEAN, COMMIT_ACTIONS, Timeline

log = logging.getLogger(__name__)

CLEAN_AUTOMATIC_KEY = "hoodie.clean.automatic"
CLEAN_ASYNC_KEY = "hoodie.clean.async"
CLEAN_MAX_COMMITS_KEY = "hoodie.clean.max.commits"
ARCHIVE_AUTOMATIC_KEY = "hoodie.archive.automatic"

T = TypeVar("T")


def after_commit(base_path: str, *, lock: TableLock | None = None,
                 async_clean: AsyncClean | None = None) -> TableServicesResult:
    """Run the services due after a commit on `base_path` (the async clean, when one was started, is waited for
    instead of cleaning again)."""
    out = TableServicesResult()
    cfg = load_table_config(base_path)
    if async_clean is not None:
        out.clean, error = async_clean.wait()
        _record(out, "clean", error)
    elif cfg.setting(CLEAN_AUTOMATIC_KEY) and _clean_due(base_path, cfg):
        out.clean = _attempt(out, "clean", lambda: _clean(base_path, lock))
    if cfg.setting(ARCHIVE_AUTOMATIC_KEY):
        out.archive = _attempt(out, "archive", lambda: run_archive(base_path, lock=lock))
    return out


def _clean(base_path: str, lock: TableLock | None) -> CleanResult:
    from engine.services.clean import run_clean

    return run_clean(base_path, lock=lock, incremental=True)


def _clean_due(base_path: str, cfg: TableConfig) -> bool:
    """Java's `hoodie.clean.max.commits`: clean once that many commits completed since the last clean."""
    every = cfg.int_setting(CLEAN_MAX_COMMITS_KEY)
    if every <= 1:
        return True
    timeline = Timeline.load(base_path)
    last = timeline.last_completed(frozenset({CLEAN}))
    since = [i for i in timeline.completed() if i.action in COMMIT_ACTIONS
             and (last is None or i.timestamp > last.timestamp)]
    return len(since) >= every


def _attempt(out: TableServicesResult, service: str, run: Callable[[], T]) -> T | None:
    try:
        return run()
    except TidemarkError as exc:   # refused (lock busy, a compaction runs, a savepoint): skipped till next time
        _record(out, service, exc)
    except Exception as exc:  # noqa: BLE001 — the commit stands whatever a service does; the error is reported
        log.exception("automatic %s failed", service)
        _record(out, service, exc)
    return None


def _record(out: TableServicesResult, service: str, error: BaseException | None) -> None:
    if isinstance(error, Refused):
        out.skipped.append(f"{service}: {error}")
    elif error is not None:
        out.errors.append(f"{service}: {type(error).__name__}: {error}")


def start_async_clean(base_path: str, lock: TableLock | None = None) -> AsyncClean | None:
    """Start the clean on a thread when the table asks for an automatic async clean (`hoodie.clean.async`);
    None otherwise (the clean then runs after the commit, if due)."""
    cfg = load_table_config(base_path)
    if not (cfg.setting(CLEAN_AUTOMATIC_KEY) and cfg.setting(CLEAN_ASYNC_KEY) and _clean_due(base_path, cfg)):
        return None
    return AsyncClean(base_path, lock)


class AsyncClean:
    """A clean running on its own thread while a write runs (Java's AsyncCleanerService)."""

    def __init__(self, base_path: str, lock: TableLock | None) -> None:
        self.result: CleanResult | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(base_path, lock), name="tidemark-async-clean",
                                        daemon=True)
        self._thread.start()

    def _run(self, base_path: str, lock: TableLock | None) -> None:
        try:
            self.result = _clean(base_path, lock)
        except BaseException as exc:  # noqa: BLE001 — handed to the waiting write, which reports it
            self.error = exc

    def wait(self) -> tuple[CleanResult | None, BaseException | None]:
        self._thread.join()
        return self.result, self.error
