"""Which value a compaction setting takes, and why: the one place settings are resolved.

Precedence: an explicit argument (API keyword or CLI flag) or a per-call `hoodie.*` override, then the
table's stored setting (hoodie.properties), then Tidemark's default. Callers pass None for "not given",
never a default of their own, so a table's settings always apply when the caller is silent. The
resolved values remember their source; a compaction plan records them (`settings_used`).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.config.properties import (
    LOCK_PROVIDER_KEY,
    LOCK_RENEW_KEY,
    LOCK_VALIDITY_KEY,
    WRITE_SETTINGS,
    TableConfig,
)
from engine.errors import ConfigError
from engine.io import storage
from engine.io.store_lock import MIN_RENEWALS_PER_LEASE

ARGUMENT, TABLE, DEFAULT = "argument", "table", "default"
STREAM = "stream"   # the threshold followed the table's stream: its watermark minus the stream lateness
STORE = "store"   # what the table's storage allows decided it (object stores carry over by copy)

STRATEGY_KEY = "hoodie.compaction.strategy"
CARRY_OVER_KEY = "hoodie.compaction.carry.over.mode"
EXACT_KEY = "hoodie.compaction.exact.event.time"
DATA_LATENCY_KEY = "hoodie.compaction.event.time.data.latency"
STREAM_LATENESS_KEY = "hoodie.compaction.event.time.stream.lateness"
SIZE_THRESHOLD_KEY = "hoodie.compaction.logfile.size.threshold"
TARGET_IO_KEY = "hoodie.compaction.target.io"
THRESHOLD = "threshold"


@dataclass(frozen=True)
class Resolved:
    value: Any
    source: str  # ARGUMENT | TABLE | DEFAULT | STORE


def resolve(cfg: TableConfig, key: str, argument: Any = None,
            overrides: Mapping[str, str] | None = None) -> Resolved:
    """The value of setting `key`: argument, else per-call override, else table, else default (parsed)."""
    parse, default = WRITE_SETTINGS[key]
    if argument is not None:
        return Resolved(argument, ARGUMENT)
    if (overrides or {}).get(key):
        return Resolved(parse(str((overrides or {})[key])), ARGUMENT)
    if cfg.props.get(key):
        return Resolved(parse(cfg.props[key]), TABLE)
    return Resolved(parse(default), DEFAULT)


@dataclass(frozen=True)
class CompactionSettings:
    """Everything a compaction plan is made with. `data_latency_ms` and `stream_lateness_ms` are None when nobody
    configured one."""

    strategy: Resolved
    carry_over: Resolved
    exact: Resolved
    data_latency_ms: Resolved
    stream_lateness_ms: Resolved = Resolved(None, DEFAULT)

    def used(self) -> dict[str, Resolved]:
        used = {STRATEGY_KEY: self.strategy, CARRY_OVER_KEY: self.carry_over, EXACT_KEY: self.exact,
                DATA_LATENCY_KEY: self.data_latency_ms}
        if self.stream_lateness_ms.value is not None:   # recorded where it is configured only
            used[STREAM_LATENESS_KEY] = self.stream_lateness_ms
        return used

    @property
    def follows_stream(self) -> bool:
        """Whether a schedule given no threshold follows the stream: a stream lateness is configured and no data
        latency was passed with the call (an explicit latency is the caller's choice over the table's)."""
        return self.stream_lateness_ms.value is not None and self.data_latency_ms.source != ARGUMENT


def compaction_settings(cfg: TableConfig, *, strategy: str | None, carry_over: str | None, exact: bool | None,
                        data_latency_ms: int | None, overrides: Mapping[str, str] | None) -> CompactionSettings:
    latency = resolve(cfg, DATA_LATENCY_KEY, data_latency_ms, overrides)
    if latency.source == DEFAULT:  # the "0s" default is not a latency anyone asked for
        latency = Resolved(None, DEFAULT)
    lateness = resolve(cfg, STREAM_LATENESS_KEY, None, overrides)
    if lateness.source == DEFAULT:   # unset: schedules do not follow a stream
        lateness = Resolved(None, DEFAULT)
    return CompactionSettings(
        strategy=resolve(cfg, STRATEGY_KEY, strategy, overrides),
        carry_over=carry_over_mode(cfg, resolve(cfg, CARRY_OVER_KEY, carry_over, overrides)),
        exact=resolve(cfg, EXACT_KEY, exact, overrides),
        data_latency_ms=latency,
        stream_lateness_ms=lateness,
    )


def refuse_impossible_settings(base_path: str, settings: Mapping[str, str]) -> None:
    """Settings the table's store cannot honour, refused when they are stored (create, update) rather than at
    every compaction after: symlink carry-over on an object store."""
    if settings.get(CARRY_OVER_KEY) == "symlink" and not storage.supports_links(base_path):
        raise ConfigError(f"{base_path}: {CARRY_OVER_KEY}=symlink is impossible on object storage (no links); "
                          "carry-over there is a server-side copy (leave the key unset, or set copy)")
    if settings.get(LOCK_PROVIDER_KEY) and not storage.conditional_replace(base_path):
        raise ConfigError(f"{base_path}: {LOCK_PROVIDER_KEY}={settings[LOCK_PROVIDER_KEY]} needs an object store "
                          "with conditional writes (S3); a table on one host's disk is serialised by its file lock")
    try:
        validity = int(settings.get(LOCK_VALIDITY_KEY) or "300")
        renew = int(settings.get(LOCK_RENEW_KEY) or "30")
    except ValueError:
        raise ConfigError(f"{LOCK_VALIDITY_KEY} and {LOCK_RENEW_KEY} must be whole seconds, not "
                          f"{settings.get(LOCK_VALIDITY_KEY)!r} and {settings.get(LOCK_RENEW_KEY)!r}") from None
    if validity < MIN_RENEWALS_PER_LEASE * renew:
        raise ConfigError(f"{LOCK_VALIDITY_KEY}={validity} must be at least {MIN_RENEWALS_PER_LEASE} times "
                          f"{LOCK_RENEW_KEY}={renew}: a lease must survive a renewal that fails once")


def carry_over_mode(cfg: TableConfig, mode: Resolved) -> Resolved:
    """Object stores have no links: carry-over is a (server-side) copy there whatever the default, and a
    symlink someone asked for (argument or table setting) is refused rather than silently changed."""
    if storage.supports_links(cfg.base_path) or mode.value == "copy":
        return mode
    if mode.source == DEFAULT:
        return Resolved("copy", STORE)
    where = "hoodie.compaction.carry.over.mode=symlink in the table" if mode.source == TABLE else "carry-over symlink"
    raise ConfigError(f"{cfg.base_path}: {where} is impossible on object storage (no links); "
                      "carry over by copy (--carry-over copy, server-side)")
