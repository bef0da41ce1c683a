"""Positive numbers read from the environment (dispatch's sampling chunk, the workers' and beat's intervals): a bad
value names its variable."""
from __future__ import annotations

import os


def positive_env(name: str, default: float, *, whole: bool = False, unit: str = "") -> float:
    """`name`'s value (`default` when unset), which must be positive (a whole number when `whole`); ValueError
    naming the variable otherwise. `unit` words the error ("seconds")."""
    raw = os.environ.get(name, str(default))
    try:
        value = int(raw) if whole else float(raw)
    except ValueError:
        wanted = "a whole number" if whole else f"a number of {unit}" if unit else "a number"
        raise ValueError(f"{name} must be {wanted}, got {raw!r}") from None
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {raw!r}")
    return value


def positive_int_env(name: str, default: int) -> int:
    return int(positive_env(name, default, whole=True))
