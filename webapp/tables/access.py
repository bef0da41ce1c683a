"""The one way the web opens a registered table: its path resolved again now and held against
TIDEMARK_TABLE_ROOTS (`inputs.table_path`), then opened through the engine.

A folder registered under a root can be swapped for a link out of the roots later; checking at registration is
not enough. Every page and API call that reads a table — the table page's pending plan, the timeline page, a
plan preview, the settings editor — comes through here, so none can read what the allow-list forbids
(tests/webapp/tables/test_access.py holds the web to it; the workers' one way is `tasks.location.open_table`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from webapp.tables import inputs
from webapp.tables.models import RegisteredTable

if TYPE_CHECKING:
    from engine import Table


def open_registered(table: RegisteredTable) -> Table:
    """The engine's table at `table`'s path; InvalidInput when the path now resolves outside the roots, or holds
    no table the engine can open (the message names the path and what is wrong)."""
    return open_location(inputs.table_path(table.path))


def open_location(location: str) -> Table:
    """The engine's table at `location`, a path `inputs.table_path` has just checked (registration's candidate)."""
    from engine import Table, TableNotFoundError, TidemarkError

    try:
        return Table.open(location)
    except TableNotFoundError as exc:   # its message names the path and what is missing
        raise inputs.InvalidInput(str(exc)) from None
    except TidemarkError as exc:
        raise inputs.InvalidInput(f"cannot open the table at {location}: {exc}") from None
