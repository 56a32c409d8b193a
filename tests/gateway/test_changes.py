"""The gateway's cache version moves after every committed write the gateway depends
on — whatever writes it, QuerySet.update() included — and not for writes it ignores."""

from __future__ import annotations

import pytest
import redis
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from console.gateway.changes import VERSION_KEY, touches_gateway
from console.gateway.services import apikey_create
from console.models import ApiKey, Node
from tests.factories import make_cluster

pytestmark = pytest.mark.django_db(transaction=True)


def version() -> int:
    return int(redis.Redis.from_url(str(settings.REDIS_URL)).get(VERSION_KEY) or 0)


def test_writes_the_gateway_caches_bump_the_version_after_commit() -> None:
    cluster = make_cluster(name="chg", nodes=2)
    key, _ = apikey_create(name="chg-key", user=None)
    before = version()
    Node.objects.filter(cluster=cluster).update(api_port=9999)  # no signal is sent
    assert version() > before
    before = version()
    Node.objects.filter(cluster=cluster).update(last_seen_at=timezone.now())
    ApiKey.objects.filter(pk=key.pk).update(last_used_at=timezone.now())
    assert version() == before  # telemetry and usage writes do not reload anything
    with transaction.atomic():
        ApiKey.objects.filter(pk=key.pk).update(revoked_at=timezone.now())
        assert version() == before  # not before the commit: a reload would miss it
    assert version() > before


@pytest.mark.parametrize(
    ("sql", "touches"),
    [
        ('UPDATE "console_cluster" SET "state" = %s WHERE "id" = %s', True),
        ('UPDATE "console_node" SET "state" = %s, "last_seen_at" = %s', False),
        ('INSERT INTO "console_apikey" ("name") VALUES (%s)', True),
        ('DELETE FROM "console_engineprofile" WHERE "id" = %s', True),
        ('TRUNCATE "console_apikey", "auth_user" RESTART IDENTITY CASCADE', True),
        ('UPDATE "console_operation" SET "state" = %s', False),
        ('SELECT * FROM "console_apikey"', False),
    ],
)
def test_it_knows_which_statements_matter(sql: str, touches: bool) -> None:
    assert touches_gateway(sql) is touches
