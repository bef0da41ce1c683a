"""`manage.py tidemark_users`: create the viewer/operator groups and demo users, printing passwords.

A demo user is given a random password (printed) when it is created; on later runs (every `make run`,
every compose start) an existing user keeps its password — an operator who changed it is not locked out —
unless `--reset` asks for new random ones. `--password` sets that password for every demo user (tests,
scripted set-ups).
"""
from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandParser

from webapp.accounts.roles import GROUPS, OPERATOR, VIEWER

DEMO_USERS = (("operator", OPERATOR), ("viewer", VIEWER))


class Command(BaseCommand):
    help = "Create the viewer and operator groups and the demo users operator/viewer; print their passwords."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--password", help="use this password for every demo user instead of random ones")
        parser.add_argument("--groups-only", action="store_true", help="only create the groups")
        parser.add_argument("--reset", action="store_true", help="give existing demo users new random passwords")

    def handle(self, *args: Any, password: str | None = None, groups_only: bool = False, reset: bool = False,
               **options: Any) -> None:
        for name in GROUPS:
            Group.objects.get_or_create(name=name)
        if groups_only:
            self.stdout.write("groups: " + ", ".join(GROUPS))
            return
        users = get_user_model()
        for username, group in DEMO_USERS:
            user, created = users.objects.get_or_create(username=username)
            user.groups.set([Group.objects.get(name=group)])
            if not (created or reset or password):
                self.stdout.write(f"{group:<9} user: {username:<9} (exists; password unchanged — "
                                  "`manage.py tidemark_users --reset` sets a new one)")
                continue
            secret = password or secrets.token_urlsafe(9)
            user.set_password(secret)
            user.save()
            self.stdout.write(f"{group:<9} user: {username:<9} password: {secret}")
