"""CLI rendering: the progress bar appears on a terminal only; refusals render their code and instant."""
from __future__ import annotations

import io
import json

from engine.cli import output
from engine.errors import PENDING_COMPACTION, Refused


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_no_progress_bar_when_piped(monkeypatch) -> None:
    piped = io.StringIO()
    monkeypatch.setattr("sys.stderr", piped)
    with output.progress_bar("compacting") as on_progress:
        assert on_progress is None
    assert piped.getvalue() == ""


def test_progress_bar_on_a_terminal(monkeypatch) -> None:
    tty = _Terminal()
    monkeypatch.setattr("sys.stderr", tty)
    with output.progress_bar("compacting") as on_progress:
        assert on_progress is not None
        for done in range(4):
            on_progress(done, 3, "file groups")
    assert "compacting (file groups)" in tty.getvalue()


def test_refusal_rendering(capsys) -> None:
    refused = Refused(PENDING_COMPACTION, "compaction 20260101000000000 is still requested", "20260101000000000")
    output.refusal(refused, as_json=True)
    assert json.loads(capsys.readouterr().out) == {"refused": "pending_compaction", "message": refused.message,
                                                   "blocking_instant": "20260101000000000"}
    output.refusal(refused, as_json=False)
    err = capsys.readouterr().err
    assert err.startswith("tidemark: refused [pending_compaction] (blocked by 20260101000000000)")


def test_a_schedules_settings_read_as_words(tmp_path, capsys):
    """Issue 34 item 11: `= no (default)` and `= — (default)`, never `= False` or `= None`."""
    from engine.cli import main
    from tests.support.tables import three_day_table

    three_day_table(tmp_path)
    assert main(["compaction", "schedule", str(tmp_path / "t"), "--threshold", "2024-01-02T12:00:00Z", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "hoodie.compaction.exact.event.time = no (default)" in out
    assert "hoodie.compaction.event.time.data.latency = — (default)" in out
    assert "False" not in out and "None" not in out
