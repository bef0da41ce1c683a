"""The audit log lists every action with its user, filterable."""
from webapp.tables import services


def test_audit_log_lists_actions_with_users(viewer_client, flights, operator):
    services.request_run(flights, "clean", operator)
    services.audit(None, "sla_breached", table=flights, outcome="breached", detail={"lag_seconds": 10800})
    html = viewer_client.get("/audit/").content.decode()
    assert "olivia" in html and "request.clean" in html and "sla_breached" in html
    filtered = viewer_client.get("/audit/?actor=olivia").content.decode()
    assert "request.clean" in filtered and "sla_breached" not in filtered
