"""`manage.py tidemark_token` prints a bearer token that authenticates as its user."""
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from webapp.accounts.models import ApiToken


def test_issued_token_authenticates_and_only_its_hash_is_stored(viewer):
    out = StringIO()
    call_command("tidemark_token", "victor", "--name", "ci", stdout=out)
    raw = out.getvalue().strip()
    assert raw.startswith("tm_") and not ApiToken.objects.filter(key_digest=raw).exists()
    assert Client().get("/api/runs", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 200


def test_unknown_user_is_an_error(db):
    with pytest.raises(CommandError, match="no user named 'nobody'"):
        call_command("tidemark_token", "nobody", stdout=StringIO())
