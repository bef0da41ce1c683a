"""Bulk registration (engine `Table.discover` + webapp.tables.discovery), on SQLite and PostgreSQL: nested
tables are found, a metadata table under `.hoodie/metadata` and a table's own partitions are not searched,
a dry run writes nothing, a second run registers nothing new, name clashes are refused with the reason,
and the page and `manage.py tidemark_discover` do the same."""
from __future__ import annotations

import json
import os
import re
import uuid

import pytest
from django.core.management import call_command
from django.test import Client

from engine import Table
from webapp.accounts.roles import OPERATOR
from webapp.tables import discovery
from webapp.tables.inputs import InvalidInput
from webapp.tables.models import AuditEvent, RegisteredTable

NESTED = ["sales/orders", "sales/eu/refunds", "web/clicks", "top"]


def make_table(path) -> None:
    Table.create(str(path), name=path.name.replace("-", "_"), record_keys=["id"], ordering_field="ts",
                 event_time_field="ts")


@pytest.fixture
def root(stack_env):
    """Four tables at different depths, a metadata table inside one, a table-looking folder inside another's
    partition, a folder that only looks like a table (no properties), and unrelated folders."""
    root = stack_env.table_root / f"lake-{uuid.uuid4().hex[:8]}"   # the stack (and its table root) is per session
    # The tables inside others first: Tidemark refuses to create a table inside a table, other tools do not.
    make_table(root / "sales" / "orders" / ".hoodie" / "metadata")           # Hudi's metadata table
    make_table(root / "web" / "clicks" / "2026" / "inner")                     # inside a table: not searched
    for rel in NESTED:
        make_table(root / rel)
    (root / "broken" / ".hoodie").mkdir(parents=True)                          # no hoodie.properties
    (root / "empty" / "deeper").mkdir(parents=True)
    return root


def test_engine_finds_nested_tables_but_not_metadata_tables(root):
    found = Table.discover(str(root))
    assert [f.relative for f in found] == sorted(NESTED, key=lambda r: str(root / r))
    assert all(".hoodie" not in f.path for f in found)
    with pytest.raises(FileNotFoundError):
        Table.discover(str(root / "missing"))


def test_dry_run_writes_nothing_and_a_second_run_registers_nothing_new(root):
    dry = discovery.discover(None, str(root), dry_run=True)
    assert dry.summary() == {"found": 4, "new": 4, "registered": 0, "already_registered": 0, "refused": 0}
    assert sorted(c.name for c in dry.candidates) == ["sales-eu-refunds", "sales-orders", "top", "web-clicks"]
    assert not RegisteredTable.objects.exists() and not AuditEvent.objects.exists()

    first = discovery.discover(None, str(root), dry_run=False, defaults=discovery.Defaults(freshness_sla_minutes=30))
    assert first.summary()["registered"] == 4
    registered = RegisteredTable.objects.order_by("name")
    assert [t.path for t in registered] == [str(root / r) for r in ("sales/eu/refunds", "sales/orders", "top",
                                                                     "web/clicks")]
    assert {t.freshness_sla_minutes for t in registered} == {30}
    assert AuditEvent.objects.filter(action="register").count() == 4
    assert AuditEvent.objects.filter(action="discover").get().detail["registered"] == 4

    make_table(root / "web" / "views")
    second = discovery.discover(None, str(root), dry_run=False)
    assert second.summary() == {"found": 5, "new": 0, "registered": 1, "already_registered": 4, "refused": 0}
    assert RegisteredTable.objects.count() == 5


def test_name_clashes_and_unopenable_tables_are_refused_with_the_reason(root, stack_env):
    elsewhere = stack_env.table_root / f"other-top-{uuid.uuid4().hex[:8]}"
    make_table(elsewhere)
    RegisteredTable.objects.create(name="top", path=str(elsewhere))
    (root / "web" / "clicks" / ".hoodie" / "hoodie.properties").write_text("hoodie.table.type=COPY_ON_WRITE\n")
    report = discovery.discover(None, str(root), dry_run=False)
    refused = {c.name: c.reason for c in report.candidates if c.outcome == "refused"}
    assert refused.keys() == {"top", "web-clicks"}
    assert f"taken by the table at {elsewhere}" in refused["top"]
    assert "cannot open it" in refused["web-clicks"]
    assert RegisteredTable.objects.filter(name="top").get().path == str(elsewhere)   # untouched
    prefixed = discovery.discover(None, str(root / "top"), dry_run=True, prefix="lake-")
    assert [c.name for c in prefixed.candidates] == ["lake-top"]


def test_roots_outside_the_allow_list_are_refused(root, tmp_path):
    with pytest.raises(InvalidInput, match="outside the allowed table roots"):
        discovery.discover(None, str(tmp_path), dry_run=True)
    with pytest.raises(InvalidInput, match="prefix"):
        discovery.discover(None, str(root), dry_run=True, prefix="Bad Prefix")


def test_command_dry_run_then_register(root, capsys):
    call_command("tidemark_discover", str(root), "--dry-run")
    out = capsys.readouterr().out
    assert "would register" in out and "4 tables under" in out and "dry run: nothing written" in out
    assert not RegisteredTable.objects.exists()
    call_command("tidemark_discover", str(root), "--json", "--sla-minutes", "15")
    body = json.loads(capsys.readouterr().out)
    assert body["registered"] == 4 and not body["dry_run"]
    assert set(RegisteredTable.objects.values_list("freshness_sla_minutes", flat=True)) == {15}
    call_command("tidemark_discover", str(root))
    assert "4 already registered" in capsys.readouterr().out


def test_page_dry_run_then_register(root, stack_env):
    from tests.support.records import make_user

    client = Client()
    client.force_login(make_user("discoverer", OPERATOR))
    html = client.post("/tables/discover", {"root": str(root), "dry_run": "1"}).content.decode()
    assert html.count('data-outcome="new"') == 4 and "Dry run: nothing was registered" in html
    assert not RegisteredTable.objects.exists()
    html = client.post("/tables/discover", {"root": str(root), "freshness_sla_minutes": "45"}).content.decode()
    assert html.count('data-outcome="registered"') == 4
    assert set(RegisteredTable.objects.values_list("freshness_sla_minutes", flat=True)) == {45}
    bad = client.post("/tables/discover", {"root": "relative/path"}, follow=True).content.decode()
    assert "must be absolute" in bad
    assert os.path.isdir(root)
    assert re.search(r"Register every table under a folder", client.get("/").content.decode())


def test_a_name_registered_meanwhile_refuses_that_table_alone(root):
    report = discovery.discover(None, str(root), dry_run=True)
    RegisteredTable.objects.create(name="top", path="/somewhere/else")       # between the check and the insert
    registered = discovery._register_batch(None, str(root), report.candidates, discovery.Defaults())
    outcomes = {c.name: c.outcome for c in report.candidates}
    assert outcomes.pop("top") == "refused" and set(outcomes.values()) == {"registered"}
    assert len(registered) == 3 and RegisteredTable.objects.get(name="top").path == "/somewhere/else"
    from webapp.tables.models import SamplingState

    assert SamplingState.objects.filter(table_id__in=registered).count() == 3
