"""``manage.py apikey create NAME [--rpm N --tpm N] | revoke NAME | list``: gateway keys
from the shell."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from console.gateway.services import apikey_create, apikey_revoke
from console.models import ApiKey


class Command(BaseCommand):
    help = "Create (prints the key once), revoke or list /v1 gateway API keys."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser(
            "create", help="create a key and print it (only this once)"
        )
        create.add_argument("name")
        create.add_argument(
            "--rpm", type=int, default=60, help="requests per minute (default 60)"
        )
        create.add_argument(
            "--tpm",
            type=int,
            default=100_000,
            help="tokens per minute (default 100000)",
        )
        revoke = sub.add_parser("revoke", help="revoke a key: requests with it get 401")
        revoke.add_argument("name")
        sub.add_parser("list", help="list keys (prefix, limits, state)")

    def handle(self, *args: Any, **opts: Any) -> None:
        if opts["action"] == "create":
            try:
                key, secret = apikey_create(
                    name=opts["name"], user=None, rpm=opts["rpm"], tpm=opts["tpm"]
                )
            except ValidationError as exc:
                raise CommandError(
                    "; ".join(
                        f"{f}: {' '.join(m)}" for f, m in exc.message_dict.items()
                    )
                ) from None
            self.stderr.write(
                f"created key {key.name} ({key.rpm} req/min, {key.tpm} tokens/min); "
                "it is not shown again:"
            )
            self.stdout.write(secret)
        elif opts["action"] == "revoke":
            found = ApiKey.objects.filter(name=opts["name"]).first()
            if found is None:
                raise CommandError(
                    f"no API key named {opts['name']!r} "
                    "(`manage.py apikey list` shows them)"
                )
            apikey_revoke(key=found, user=None)
            self.stdout.write(f"revoked {found.name}")
        else:
            for key in ApiKey.objects.all():
                state = (
                    f"revoked {key.revoked_at:%Y-%m-%d %H:%M}"
                    if key.revoked_at
                    else "active"
                )
                self.stdout.write(
                    f"{key.name}\t{key.prefix}…\t{key.rpm} rpm\t{key.tpm} tpm\t{state}"
                )
