"""A live gateway for the SDK tests: two sim engines (vLLM 0.33 and one posing as
pre-0.11.1) and uvicorn.

The engines and the server live for the whole module (they hold no database
state); each test makes its own clusters and keys, which the server reads from the
shared test database.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.simengine import SimEngine, sim_engine

NEW_MODEL, OLD_MODEL = "gw-new", "gw-old"


@pytest.fixture(scope="module")
def engines() -> Iterator[dict[str, SimEngine]]:
    with sim_engine(NEW_MODEL) as new, sim_engine(OLD_MODEL) as old:
        yield {NEW_MODEL: new, OLD_MODEL: old}


@pytest.fixture(scope="module")
def gateway_url(django_db_setup: Any, django_db_blocker: Any) -> Iterator[str]:
    """uvicorn serving console.asgi on the test database; usage flushed after every
    request."""
    from tests.e2e.test_dashboard import uvicorn_server

    os.environ["GATEWAY_USAGE_FLUSH_S"] = "0"
    try:
        with uvicorn_server() as base:
            yield base
    finally:
        os.environ.pop("GATEWAY_USAGE_FLUSH_S", None)
