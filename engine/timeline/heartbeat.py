"""Writer heartbeats: `.hoodie/.heartbeat/<instant>`, an empty file whose modification time says "alive".

Java's HoodieHeartbeatClient: the writer creates the file when its instant starts, a timer re-creates it
every `hoodie.client.heartbeat.interval_in_ms` (default 60 s), and it is deleted when the write ends. A
pending instant whose heartbeat is older than interval × `hoodie.client.heartbeat.tolerable.misses`
(default 2) — or missing, which Java reads as last heartbeat 0 — belongs to a dead writer and may be
rolled back by anyone (the LAZY failed-writes cleaning policy). A live heartbeat is never rolled back.
"""
from __future__ import annotations

import threading
import time
from types import TracebackType

from engine.config.properties import TableConfig
from engine.io import storage

HEARTBEAT_DIR = ".heartbeat"
INTERVAL_KEY = "hoodie.client.heartbeat.interval_in_ms"
MISSES_KEY = "hoodie.client.heartbeat.tolerable.misses"
DEFAULT_INTERVAL_MS = 60_000


def heartbeat_dir(base_path: str) -> str:
    return storage.join(base_path, ".hoodie", HEARTBEAT_DIR)


def heartbeat_path(base_path: str, instant: str) -> str:
    return storage.join(heartbeat_dir(base_path), instant)


def expiry_ms(cfg: TableConfig) -> int:
    """How old a heartbeat may get before its writer counts as dead (interval × tolerable misses)."""
    interval = cfg.int_setting(INTERVAL_KEY)
    misses = cfg.int_setting(MISSES_KEY)
    return interval * misses


def last_heartbeat_ms(base_path: str, instant: str) -> int:
    """Epoch millis of the last heartbeat of `instant`; 0 when there is none (as Java reads it)."""
    try:
        return storage.mtime_ms(heartbeat_path(base_path, instant))
    except FileNotFoundError:
        return 0


def is_expired(base_path: str, instant: str, expiry: int, now_ms: int | None = None) -> bool:
    now = int(time.time() * 1000) if now_ms is None else now_ms
    return now - last_heartbeat_ms(base_path, instant) > expiry


def delete_heartbeat(base_path: str, instant: str) -> bool:
    """Remove the heartbeat file of a finished (or rolled-back) instant; False when there was none."""
    try:
        storage.remove(heartbeat_path(base_path, instant))
    except FileNotFoundError:
        return False
    return True


def heartbeat_instants(base_path: str) -> list[str]:
    directory = heartbeat_dir(base_path)
    return sorted(storage.list_names_if_dir(directory))


class Heartbeat:
    """Keeps `instant` alive from `start` (first beat written synchronously) until `stop` (file deleted).

    A daemon thread beats, so a killed process stops beating and its instant expires on its own.
    """

    def __init__(self, base_path: str, instant: str, interval_ms: int = DEFAULT_INTERVAL_MS) -> None:
        if interval_ms < 1:
            raise ValueError(f"heartbeat interval must be positive, got {interval_ms} ms")
        self.base_path = base_path
        self.instant = instant
        self.interval_s = interval_ms / 1000
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Heartbeat:
        storage.make_dirs(heartbeat_dir(self.base_path))
        self.beat()  # before the instant exists: it is never pending without a heartbeat
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{self.instant}", daemon=True)
        self._thread.start()
        return self

    def beat(self) -> None:
        # Re-creating the file (not utime) works on every file system, like Java's fs.create(overwrite).
        storage.write_bytes(heartbeat_path(self.base_path, self.instant), b"")

    def _run(self) -> None:
        while not self._stopped.wait(self.interval_s):
            try:
                self.beat()
            except OSError:
                return  # table gone or unwritable: stop beating, the instant will expire

    def stop(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()
        delete_heartbeat(self.base_path, self.instant)

    def __enter__(self) -> Heartbeat:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
