"""overview: the newest sample and run of every table in a constant number of queries."""
import datetime as dt
import re

from tests.support.records import T0, sample
from webapp.tables import overview
from webapp.tables.models import RegisteredTable, Run


def test_statuses_take_four_queries_and_pick_the_newest_rows(flights, django_assert_num_queries):
    Run.objects.create(table=flights, kind="clean", state="succeeded", queued_at=T0)
    newest = Run.objects.create(table=flights, kind="rollback", state="failed", queued_at=T0 + dt.timedelta(hours=1))
    Run.objects.create(table=flights, kind="metrics", state="succeeded", queued_at=T0 + dt.timedelta(hours=2))
    RegisteredTable.objects.create(name="bare", path="/x/bare", freshness_sla_minutes=5)
    with django_assert_num_queries(4):
        rows = {s.table["name"]: s for s in overview.statuses(RegisteredTable.objects.all())}
    assert rows["flights"].sample["remaining_log_files"] == 4          # the newer of two samples
    assert rows["flights"].last_run["id"] == newest.pk                # metrics refreshes are not "runs" here
    assert (rows["flights"].sla, rows["flights"].late) == ("breached", True)
    assert (rows["bare"].sample, rows["bare"].last_run, rows["bare"].sla) == (None, None, "unknown")


def test_sla_status():
    assert overview.sla_status(None, {"freshness_lag_seconds": 1e9}) == "none"
    assert overview.sla_status(60, None) == "unknown"
    assert overview.sla_status(60, {"freshness_lag_seconds": 3600}) == "ok"
    assert overview.sla_status(60, {"freshness_lag_seconds": 3601}) == "breached"


def test_list_page_paginates(operator_client, flights):
    for i in range(120):
        sample(RegisteredTable.objects.create(name=f"t{i:03d}", path=f"/x/{i}"), T0, completion=T0, lag_s=1)
    first = operator_client.get("/").content.decode()
    assert ">121</span>" in first and first.count('class="strong">') == 100     # keyset pages of 100
    after = re.search(r'href="\?([^"]+)" rel="next"', first).group(1).replace("&amp;", "&")
    assert "t119" in operator_client.get(f"/?{after}").content.decode()
