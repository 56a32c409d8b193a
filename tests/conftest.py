from __future__ import annotations

from typing import Any

import pytest

# Django imports stay inside the fixtures, so engine-only test runs
# (pytest -p no:django tests/engine/...) can collect without settings.


@pytest.fixture
def viewer(db: Any) -> Any:
    from tests.factories import make_user

    return make_user("vera", "viewer")


@pytest.fixture
def operator(db: Any) -> Any:
    from tests.factories import make_user

    return make_user("otto", "operator")


@pytest.fixture
def admin(db: Any) -> Any:
    from tests.factories import make_user

    return make_user("ada", "admin")


@pytest.fixture
def norole(db: Any) -> Any:
    from tests.factories import make_user

    return make_user("nobody", None)


@pytest.fixture
def cluster(db: Any) -> Any:
    """The demo cluster qwen35-prod: ascend-01..04, ranks 0..3 (plus the standby and the spare)."""
    from console.models import Cluster
    from console.services.inventory import demo_seed

    demo_seed()
    return Cluster.objects.get(name="qwen35-prod")


def login(user: Any) -> Any:
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client


@pytest.fixture(autouse=True)
def _english_messages(request: Any) -> Any:
    """Messages asserted in English; the UI default is zh-Hans. Requests still
    pick their language through LocaleMiddleware."""
    from django.conf import settings
    from django.utils import translation

    if not settings.configured:  # engine-only runs with -p no:django
        yield
        return

    with translation.override("en"):
        yield
