"""`manage.py tidemark_token USER [--name NAME]`: issue an API token for USER and print it (shown once)."""
from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from webapp.accounts.models import ApiToken


class Command(BaseCommand):
    help = "Issue an API bearer token for a user and print it (only its hash is stored)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="what the token is for, e.g. ci")

    def handle(self, *args, username: str, name: str, **options) -> None:
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user named {username!r}")
        _, raw = ApiToken.issue(user, name)
        self.stdout.write(raw)
