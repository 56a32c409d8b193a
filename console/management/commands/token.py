"""``manage.py token create USER`` (prints a new token, rotating any old one) |
``token revoke USER``."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from console.api.tokens import token_revoke, token_rotate


class Command(BaseCommand):
    help = "Create (or rotate) a user's REST API token and print it once, or revoke it."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser(
            "create", help="create or rotate USER's token and print it (only this once)"
        )
        create.add_argument("user")
        revoke = sub.add_parser(
            "revoke", help="delete USER's token: requests with it get 401"
        )
        revoke.add_argument("user")

    def handle(self, *args: Any, **opts: Any) -> None:
        user = get_user_model().objects.filter(username=opts["user"]).first()
        if user is None:
            raise CommandError(
                f"no user named {opts['user']!r} "
                "(create one with `manage.py createsuperuser` or the admin)"
            )
        if opts["action"] == "create":
            key = token_rotate(user=user, actor=None)
            self.stderr.write(
                f"token for {user.username} (send `Authorization: Token <key>`); "
                "it is not shown again:"
            )
            self.stdout.write(key)
        elif token_revoke(user=user, actor=None):
            self.stdout.write(f"revoked the token of {user.username}")
        else:
            raise CommandError(f"{user.username} has no token")
