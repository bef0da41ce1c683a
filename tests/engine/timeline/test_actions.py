"""Timeline actions and states as StrEnums: the same strings on disk, states ordered by progress."""

from __future__ import annotations

import json

from engine.timeline.actions import Action, State
from engine.timeline.instants import Instant, instant_file_name, parse_instant_file_name


def test_members_are_the_strings_hudi_writes() -> None:
    assert Action.DELTACOMMIT == "deltacommit" and State.INFLIGHT == "inflight"
    assert f"{Action.REPLACECOMMIT}.{State.REQUESTED}" == "replacecommit.requested"
    assert json.dumps({"action": Action.COMMIT, "state": State.COMPLETED}) == '{"action": "commit", "state": "completed"}'
    assert State.COMPLETED.name == "COMPLETED"   # the archive's (Java's HoodieInstant.State) spelling


def test_states_order_by_progress_not_alphabet() -> None:
    assert State.REQUESTED < State.INFLIGHT < State.COMPLETED
    assert State.COMPLETED > State.INFLIGHT >= State.INFLIGHT > State.REQUESTED
    assert max(State) is State.COMPLETED and sorted(State, reverse=True)[-1] is State.REQUESTED


def test_file_names_unchanged() -> None:
    assert instant_file_name("20250101000000000", Action.COMPACTION, State.COMPLETED) == "20250101000000000.commit"
    assert instant_file_name("20250101000000000", Action.COMMIT, State.INFLIGHT) == "20250101000000000.inflight"
    assert instant_file_name("20250101000000000", Action.CLEAN, State.REQUESTED) == "20250101000000000.clean.requested"
    parsed = parse_instant_file_name("20250101000000000.deltacommit.inflight")
    assert parsed == Instant("20250101000000000", "deltacommit", State.INFLIGHT)
    assert parsed is not None and parsed.action is Action.DELTACOMMIT
