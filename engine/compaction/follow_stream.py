"""The compaction that follows a stream: after a micro-batch, plan up to the stream's watermark minus the table's
`hoodie.compaction.event.time.stream.lateness`, and run it in a process of its own so the next batch does not
wait (Java's async compaction of a streaming sink, `hoodie.datasource.compaction.async.enable`).

One plan at a time, as always: while one is pending (its run, ours or the control plane's, under way or to
come) nothing is planned; a plan that would publish nothing newer than the table's freshness is not made.
"""
from __future__ import annotations

import logging
import os
import subprocess
import sys

from engine.compaction.plan import previous_ro_times, schedule_compaction, stream_threshold
from engine.config.properties import load_table_config, parse_duration_ms
from engine.config.resolve import STREAM_LATENESS_KEY
from engine.errors import TidemarkError
from engine.timeline.instants import Timeline

log = logging.getLogger(__name__)

_RUNS: list[subprocess.Popen[bytes]] = []   # compaction runs started by this process (reaped as they end)


def follow_with_compaction(base_path: str) -> str | None:
    """Schedule the compaction that follows the stream into `base_path` and start its run in another process;
    returns the scheduled instant (None: nothing to do, one pending, or the table does not follow its stream)."""
    _RUNS[:] = [p for p in _RUNS if p.poll() is None]
    cfg = load_table_config(base_path)
    lateness = cfg.props.get(STREAM_LATENESS_KEY, "").strip()
    if not lateness:
        return None
    timeline = Timeline.load(base_path)
    if timeline.pending_compactions():
        return None   # one at a time: its run (ours or the control plane's) is under way or will be
    threshold = stream_threshold(timeline, parse_duration_ms(lateness))
    _, freshness = previous_ro_times(cfg)
    if threshold is None or (freshness is not None and threshold <= freshness):
        return None
    try:
        plan = schedule_compaction(base_path)
    except TidemarkError as exc:   # e.g. the lock is busy: the next batch tries again
        log.warning("tidemark sink: no follow-stream compaction scheduled: %s", exc)
        return None
    if plan.instant is None:
        return None
    _RUNS.append(start_compaction_run(base_path, plan.instant))
    return plan.instant


def start_compaction_run(base_path: str, instant: str) -> subprocess.Popen[bytes]:
    """Run compaction `instant` in a process of its own: the stream's next batch does not wait for it."""
    code = ("import sys; from engine import Table; "
            "Table.open(sys.argv[1]).run_compaction(sys.argv[2], local=True)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    return subprocess.Popen([sys.executable, "-c", code, base_path, instant], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
