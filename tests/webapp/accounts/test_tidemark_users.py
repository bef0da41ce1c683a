"""`manage.py tidemark_users` creates the role groups and demo users and prints working passwords."""
import re
from io import StringIO

from django.contrib.auth import authenticate
from django.core.management import call_command

from webapp.accounts.roles import is_operator


def test_creates_groups_and_demo_users_with_printed_passwords(db):
    out = StringIO()
    call_command("tidemark_users", stdout=out)
    passwords = dict(re.findall(r"user: (\w+)\s+password: (\S+)", out.getvalue()))
    assert set(passwords) == {"operator", "viewer"}
    operator = authenticate(username="operator", password=passwords["operator"])
    viewer = authenticate(username="viewer", password=passwords["viewer"])
    assert is_operator(operator) and not is_operator(viewer)
    assert list(viewer.groups.values_list("name", flat=True)) == ["viewer"]


def test_rerun_resets_passwords(db):
    call_command("tidemark_users", password="first-pass", stdout=StringIO())
    call_command("tidemark_users", password="second-pass", stdout=StringIO())
    assert authenticate(username="operator", password="second-pass") is not None


def test_rerun_keeps_an_existing_password_unless_reset(db):
    """`make run` and compose run the command on every start: it must not reset the operator's password."""
    out = StringIO()
    call_command("tidemark_users", stdout=out)
    first = dict(re.findall(r"user: (\w+)\s+password: (\S+)", out.getvalue()))["operator"]
    again = StringIO()
    call_command("tidemark_users", stdout=again)
    assert "password unchanged" in again.getvalue() and "password: " not in again.getvalue()
    assert authenticate(username="operator", password=first) is not None
    reset = StringIO()
    call_command("tidemark_users", reset=True, stdout=reset)
    fresh = dict(re.findall(r"user: (\w+)\s+password: (\S+)", reset.getvalue()))["operator"]
    assert fresh != first and authenticate(username="operator", password=fresh) is not None
