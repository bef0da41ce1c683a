"""A table's housekeeping and ingestion as the detail page and the API show them: the latest sample's copy of
`engine.Table.activity()` (tasks.sampling stores it without the clock), with the lag measured at the request."""
from __future__ import annotations

import datetime as dt
from typing import Any

from webapp.tables.models import MetricSample

POLICY_KEY = "hoodie.cleaner.policy"
RETAINED_KEYS = {"KEEP_LATEST_COMMITS": "hoodie.cleaner.commits.retained",
                 "KEEP_LATEST_FILE_VERSIONS": "hoodie.cleaner.fileversions.retained",
                 "KEEP_LATEST_BY_HOURS": "hoodie.cleaner.hours.retained"}
POLICIES = (("KEEP_LATEST_COMMITS", "keep latest commits"), ("KEEP_LATEST_FILE_VERSIONS", "keep latest file versions"),
            ("KEEP_LATEST_BY_HOURS", "keep latest hours"))


def as_json(sample: MetricSample | None, now: dt.datetime) -> dict[str, Any] | None:
    """The stored facts with `ingestion.lag_seconds` as of `now` (null before the first sample that kept them)."""
    stored = dict(sample.activity or {}) if sample else {}
    if not stored.get("housekeeping") or "ingestion" not in stored:
        return None
    ingestion = dict(stored["ingestion"])
    done = _when(ingestion.get("last_write_at"))
    ingestion["lag_seconds"] = None if done is None else max(0.0, (now - done).total_seconds())
    return {"housekeeping": stored["housekeeping"], "ingestion": ingestion}


def panels(sample: MetricSample | None, now: dt.datetime) -> dict[str, Any] | None:
    """`as_json` for the template: times as datetimes, each setting with its source, the policy's retention."""
    facts = as_json(sample, now)
    if facts is None:
        return None
    hk, ing = dict(facts["housekeeping"]), dict(facts["ingestion"])
    sources = {s["key"]: s["source"] for s in hk.get("settings") or []}
    hk["last_clean_at"] = _when(hk.get("last_clean_at"))
    hk["last_clean_ago"] = None if hk["last_clean_at"] is None else max(0.0, (now - hk["last_clean_at"]).total_seconds())
    hk["policy_default"] = sources.get(POLICY_KEY) == "default"
    hk["retained_default"] = sources.get(hk.get("clean_retained_key") or "") == "default"
    hk["automatic_default"] = sources.get("hoodie.clean.automatic") == "default"
    hk["keep_default"] = sources.get("hoodie.keep.min.commits") == sources.get("hoodie.keep.max.commits") == "default"
    ing["last_write_at"] = _when(ing.get("last_write_at"))
    stream = dict(ing["stream"]) if ing.get("stream") else None
    if stream is not None:
        stream["watermark"] = _when(stream.get("watermark"))
    ing["stream"] = stream
    return {"housekeeping": hk, "ingestion": ing, "now_ms": int(now.timestamp() * 1000)}


def retention_of(sample: MetricSample | None) -> dict[str, str]:
    """The clean policy and its retention as the latest sample read them (the settings form's current values;
    "" when no sample kept them: the form then leaves the table's as they are)."""
    hk = (sample.activity or {}).get("housekeeping") if sample else None
    if not hk:
        return {"policy": "", "retained": ""}
    retained = hk.get("clean_retained")
    return {"policy": hk.get("clean_policy") or "", "retained": "" if retained is None else str(retained)}


def _when(value: Any) -> dt.datetime | None:
    if not value:
        return None
    return dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
