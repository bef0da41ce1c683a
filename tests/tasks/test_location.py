"""The allow-list holds on every run, inside the lease: a registered folder swapped for a symlink to a table
outside TIDEMARK_TABLE_ROOTS is refused (`outside_roots`) — no plan, no sample, no preview is made there."""
from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

from django.test import Client

from engine import Table
from tests.support.runs import register
from tests.support.tables import table_copy


def test_a_folder_swapped_for_a_link_out_of_the_roots_is_refused(stack_env, flights_template, tmp_path):
    from django.contrib.auth.models import Group, User

    from tasks import runner
    from webapp.accounts.roles import OPERATOR
    from webapp.tables.models import Run

    inside = table_copy(flights_template, stack_env.table_root / f"swap-{uuid.uuid4().hex[:8]}")
    table = register(inside)
    outside = table_copy(flights_template, tmp_path / "outside")
    before = sorted(p.name for p in (outside / ".hoodie").iterdir())
    shutil.rmtree(inside)
    inside.symlink_to(outside, target_is_directory=True)   # the swap, after registration

    run = Run.objects.create(table=table, kind="schedule", state="queued", threshold="2013-01-06T00:00:00Z")
    assert runner.perform(run.pk) == "refused"
    run.refresh_from_db()
    assert run.refusal_reason == "outside_roots" and str(outside) in run.error
    assert sorted(p.name for p in (outside / ".hoodie").iterdir()) == before, "something was written outside the roots"
    assert not [c for c in Table.open(str(outside)).compactions()]

    user = User.objects.create_user(f"op-{uuid.uuid4().hex[:6]}", password="pw-123456789")
    user.groups.add(Group.objects.get_or_create(name=OPERATOR)[0])
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    preview = client.post(f"/api/tables/{table.name}/preview", json.dumps({"threshold": "2013-01-06T00:00:00Z"}),
                          content_type="application/json")
    assert preview.status_code == 400 and "outside the allowed table roots" in preview.json()["error"]


def test_workers_open_tables_only_through_the_allow_list():
    """tasks.location.open_table is the workers' one way to open a registered table (it checks the roots)."""
    import ast

    root = Path(__file__).resolve().parents[2]
    openers = {str(p.relative_to(root)) for p in (root / "tasks").rglob("*.py")
               for node in ast.walk(ast.parse(p.read_text()))
               if isinstance(node, ast.Call) and ast.unparse(node.func) == "Table.open"}
    assert openers == {"tasks/location.py"}
