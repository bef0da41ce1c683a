"""`manage.py tidemark_token USER [--name NAME] [--days N | --no-expiry]`: issue an API token for USER and
print it (shown once); `--revoke NAME` revokes USER's tokens of that name (`--revoke-all`: every one)."""
from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from webapp.accounts.models import DEFAULT_LIFETIME_DAYS, ApiToken


class Command(BaseCommand):
    help = "Issue an API bearer token for a user and print it (only its hash is stored), or revoke tokens."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="what the token is for, e.g. ci")
        parser.add_argument("--days", type=float, default=DEFAULT_LIFETIME_DAYS,
                            help=f"days until the token expires (default {DEFAULT_LIFETIME_DAYS})")
        parser.add_argument("--no-expiry", action="store_true", help="a token that never expires")
        parser.add_argument("--revoke", metavar="NAME", help="revoke the user's tokens named NAME")
        parser.add_argument("--revoke-all", action="store_true", help="revoke every token of the user")

    def handle(self, *args: Any, username: str, name: str, days: float, no_expiry: bool, revoke: str | None,
               revoke_all: bool, **options: Any) -> None:
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user named {username!r}")
        if revoke is not None or revoke_all:
            tokens = ApiToken.objects.filter(user=user, revoked_at__isnull=True)
            if not revoke_all:
                tokens = tokens.filter(name=revoke)
            count = tokens.update(revoked_at=timezone.now())
            if not count:
                raise CommandError(f"{username} has no unrevoked token" + ("" if revoke_all else f" named {revoke!r}"))
            self.stdout.write(f"revoked {count} token(s) of {username}")
            return
        if not no_expiry and days <= 0:
            raise CommandError(f"--days must be positive, got {days:g}")
        _, raw = ApiToken.issue(user, name, days=None if no_expiry else days)
        self.stdout.write(raw)
