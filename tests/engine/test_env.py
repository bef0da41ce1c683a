"""engine.env: every environment variable read one way — blank is the default, a malformed value a ConfigError
naming the variable and the value."""
from __future__ import annotations

import pytest

from engine import env
from engine.errors import ConfigError


def test_unset_or_blank_is_the_default(monkeypatch):
    monkeypatch.delenv("TM_X", raising=False)
    assert env.text("TM_X", "d") == "d" and env.flag("TM_X", True) is True
    assert env.number("TM_X", 2.5) == 2.5 and env.whole("TM_X", 7) == 7
    monkeypatch.setenv("TM_X", "  ")
    assert env.text("TM_X", "d") == "d" and env.whole("TM_X", 7) == 7


@pytest.mark.parametrize(("raw", "expected"), [("1", True), ("TRUE", True), ("yes", True), ("on", True),
                                               ("0", False), ("false", False), ("No", False), ("off", False)])
def test_flags(monkeypatch, raw, expected):
    monkeypatch.setenv("TM_X", raw)
    assert env.flag("TM_X", not expected) is expected


@pytest.mark.parametrize(("reader", "raw", "message"), [
    (lambda: env.flag("TM_X", False), "maybe", "TM_X='maybe' must be true or false (1/0, yes/no, on/off)"),
    (lambda: env.number("TM_X", 1, unit="seconds"), "ten", "TM_X='ten' must be a number of seconds"),
    (lambda: env.number("TM_X", 1, unit="seconds"), "0", "TM_X='0' must be more than 0 seconds"),
    (lambda: env.number("TM_X", 1, minimum=0, exclusive=False), "-1", "TM_X='-1' must be at least 0"),
    (lambda: env.number("TM_X", 1), "nan", "TM_X='nan' must be more than 0"),
    (lambda: env.whole("TM_X", 1, unit="tables"), "2.5", "TM_X='2.5' must be a whole number of tables"),
    (lambda: env.whole("TM_X", 1, minimum=0), "-3", "TM_X='-3' must be at least 0"),
])
def test_a_malformed_value_names_the_variable(monkeypatch, reader, raw, message):
    monkeypatch.setenv("TM_X", raw)
    with pytest.raises(ConfigError) as refused:
        reader()
    assert str(refused.value) == message


def test_digit_separators(monkeypatch):
    monkeypatch.setenv("TM_X", "2_000_000")
    assert env.whole("TM_X", 1) == 2_000_000 and env.number("TM_X", 1) == 2_000_000
