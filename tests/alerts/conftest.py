from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(autouse=True)
def seeded_rules(request: Any) -> None:
    """Migration 0002 seeds the rules, but a transactional test before this one flushed them."""
    if request.node.get_closest_marker("django_db") is None:
        return
    from monitoring.alerts.services import alert_rules_seed

    alert_rules_seed()
