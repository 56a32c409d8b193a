from __future__ import annotations

from contextlib import ExitStack, nullcontext
from typing import Any

import redis
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from console.gateway import changes
from console.services.inventory import credentials_path, demo_seed, demo_users_ensure
from console.signals import sockets_offline


class Command(BaseCommand):
    help = "What `make run` does before starting the processes: migrate, seed the demo inventory, create the demo users, print the URL and logins."

    def handle(self, *args: Any, **options: Any) -> None:
        # `make run` seeds before it starts the embedded Redis: no gateway process runs
        # yet, and a new Redis starts the cache version from a random value, so every
        # gateway that starts later loads this inventory fresh. Bumping then would
        # only log a failed connection per write; with Redis up, every write bumps.
        try:
            changes._client().ping()
            bumps: Any = nullcontext()
        except redis.RedisError:
            bumps = ExitStack()  # and no socket exists yet to tell of the new users
            bumps.enter_context(changes.quiet())
            bumps.enter_context(sockets_offline())
        with bumps:
            call_command("migrate", interactive=False, verbosity=0)
            demo_seed()
            passwords = demo_users_ensure()
        url = f"http://{settings.CONSOLE_HOST}:{settings.CONSOLE_PORT}/"
        self.stdout.write("")
        self.stdout.write(self.style.SUCCESS(f"Ascend vLLM Ops Console → {url}"))
        if passwords:
            self.stdout.write(
                f"Demo logins (shown once; also in {credentials_path()}):"
            )
            for user, password in passwords.items():
                self.stdout.write(f"  {user:<9} {password}")
        else:
            self.stdout.write(
                f"Demo logins: admin / operator / viewer — passwords in {credentials_path()}"
            )
        mode = (
            f"embedded Redis on 127.0.0.1:{settings.EMBEDDED_REDIS_PORT}"
            if settings.EMBEDDED_REDIS
            else settings.REDIS_URL
        )
        self.stdout.write(
            f"Database: {settings.DATABASES['default']['ENGINE'].rsplit('.', 1)[-1]} · Broker: {mode}"
        )
        self.stdout.write("Press Ctrl-C to stop every process.\n")
