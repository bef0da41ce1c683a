"""`manage.py tidemark_users`: create the viewer/operator groups and demo users, printing passwords.

Existing demo users get a fresh password (printed) so `make run` always ends with working logins;
`--password` fixes the password instead (tests, scripted set-ups).
"""
from __future__ import annotations

import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand

from webapp.accounts.roles import GROUPS, OPERATOR, VIEWER

DEMO_USERS = (("operator", OPERATOR), ("viewer", VIEWER))


class Command(BaseCommand):
    help = "Create the viewer and operator groups and the demo users operator/viewer; print their passwords."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--password", help="use this password for every demo user instead of random ones")
        parser.add_argument("--groups-only", action="store_true", help="only create the groups")

    def handle(self, *args, password: str | None = None, groups_only: bool = False, **options) -> None:
        for name in GROUPS:
            Group.objects.get_or_create(name=name)
        if groups_only:
            self.stdout.write("groups: " + ", ".join(GROUPS))
            return
        users = get_user_model()
        for username, group in DEMO_USERS:
            user, _ = users.objects.get_or_create(username=username)
            secret = password or secrets.token_urlsafe(9)
            user.set_password(secret)
            user.save()
            user.groups.set([Group.objects.get(name=group)])
            self.stdout.write(f"{group:<9} user: {username:<9} password: {secret}")
