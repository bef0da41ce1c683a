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
