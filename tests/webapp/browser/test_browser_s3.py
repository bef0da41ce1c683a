"""Browser test on object storage: an operator registers an `s3://` table (moto's S3 server, started by the
test) through the list page's form and runs one event-time compaction on it from the table page — the live
stack's server and Celery worker reach the bucket through the AWS chain, as a deployment would.

Screenshots go to tests/artifacts/ (list-s3.png, table-s3.png) for a human to look at.
"""
from __future__ import annotations

import os
import re
import uuid

import pytest

from tests.support.browser import ARTIFACTS, PASSWORD, login, wait_for_run
from tests.support.s3_server import s3_server  # noqa: F401  (fixture)
from tests.support.tables import day_file

pytestmark = pytest.mark.parametrize("stack_env", ["sqlite"], indirect=True)
THRESHOLD = "2024-01-02T12:00:00Z"


@pytest.fixture
def s3_stack(stack_env, s3_server, tmp_path, spark, monkeypatch):  # noqa: F811
    """A bucket holding a three-write table (one file group, one log per day), and the stack's web server and
    worker started with the AWS chain pointed at the S3 server and the bucket allowed as a table root."""
    from django.core.management import call_command

    from engine import Table

    bucket = f"lake-{uuid.uuid4().hex[:10]}"
    s3_server.make_bucket(bucket)
    aws = {**s3_server.env(), "TIDEMARK_TABLE_ROOTS": f"{stack_env.table_root},s3://{bucket}"}
    for key, value in aws.items():
        monkeypatch.setenv(key, value)
    saved = dict(stack_env.env)
    stack_env.env.update(aws)
    uri = f"s3://{bucket}/orders"
    table = Table.create(uri, name="orders", record_keys=["id"], ordering_field="seq", event_time_field="ts",
                         partition_fields=["region"], settings={"hoodie.bucket.index.num.buckets": "1"})
    for i, day in enumerate(("01", "02", "03")):
        table.write(day_file(tmp_path, i, day, keys=5, extra={"region": "a"}))
    call_command("tidemark_users", password=PASSWORD, stdout=open(os.devnull, "w"))
    try:
        stack_env.start_server()
        stack_env.start_worker()
        yield {"stack": stack_env, "uri": uri, "server": s3_server}
    finally:
        stack_env.stop("worker")
        stack_env.stop("web")
        stack_env.env.clear()
        stack_env.env.update(saved)


def test_operator_registers_an_s3_table_and_compacts_it(s3_stack, browser):
    from engine import Table
    from webapp.tables.models import RegisteredTable

    stack, uri, server = s3_stack["stack"], s3_stack["uri"], s3_stack["server"]
    ARTIFACTS.mkdir(exist_ok=True)
    name = f"orders-{uuid.uuid4().hex[:6]}"
    page = login(browser, stack.url, "operator")

    page.locator("details.register summary").first.click()
    page.fill("#register-form input[name=name]", name)
    page.fill("#register-form input[name=path]", uri)
    page.select_option("#register-form select[name=carry_over]", "copy")
    page.click("#register-form button[type=submit]")
    page.wait_for_url(re.compile(rf".*/tables/{name}/.*"), timeout=120_000)
    registered = RegisteredTable.objects.get(name=name)
    assert registered.path == uri and registered.carry_over == "copy"

    page.fill("#threshold", THRESHOLD)
    page.click("button[data-action=trigger]")
    page.wait_for_url(re.compile(r".*\?run=\d+"))
    server.reset_counts()
    completion = wait_for_run(page)
    assert completion.startswith("2024-01-02"), completion   # day 01 and day 02's logs are in the base now
    page.wait_for_timeout(600)
    page.screenshot(path=str(ARTIFACTS / "table-s3.png"), full_page=True)

    done = [c for c in Table.open(uri).compactions() if c.state == "completed"]
    assert len(done) == 1
    copies = [r for r in server.counts() if r["method"] == "PUT" and r["copy_source"]]
    assert any(".log." in r["path"] for r in copies), "the carried log was not copied server-side"
    assert not any(r["method"] == "PUT" and ".log." in r["path"] and not r["copy_source"]
                   and "compaction" not in r["path"] for r in server.counts()), "a log was re-uploaded"

    page.goto(f"{stack.url}/")
    row = page.locator("#tables tr", has=page.locator(f"a:text-is('{name}')"))
    assert row.count() == 1 and uri in row.inner_text()
    page.screenshot(path=str(ARTIFACTS / "list-s3.png"), full_page=True)
    page.close()
