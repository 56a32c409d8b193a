"""deploy/prometheus passes promtool: the config (which loads the rules), the rules, their
unit tests (one per shipped rule), and the console's own /metrics output."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.test import Client, override_settings

from tests.deploy.tools import DEPLOY, need, run
from tests.monitoring.test_exporter import ingested  # noqa: F401 - fixture

PROM = DEPLOY / "prometheus"
TOKEN_PATH = "/etc/prometheus/console-metrics-token"


def shipped_rules() -> list[str]:
    rules = yaml.safe_load((PROM / "alert-rules.yml").read_text())
    return [r["alert"] for g in rules["groups"] for r in g["rules"]]


def test_it_passes_promtool_check_config_and_loads_the_rules(tmp_path: Path) -> None:
    # As installed: both files side by side in /etc/prometheus, the token file present.
    token = tmp_path / "console-metrics-token"
    token.write_text("s3cret\n")
    config = (PROM / "prometheus.yml").read_text()
    assert TOKEN_PATH in config
    (tmp_path / "prometheus.yml").write_text(config.replace(TOKEN_PATH, str(token)))
    shutil.copy(PROM / "alert-rules.yml", tmp_path)
    result = run(
        [need("promtool"), "check", "config", str(tmp_path / "prometheus.yml")]
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # The rules only act when the config loads them (rule_files).
    assert f"SUCCESS: {len(shipped_rules())} rules found" in result.stdout, (
        result.stdout
    )


def test_it_passes_promtool_check_rules() -> None:
    result = run([need("promtool"), "check", "rules", str(PROM / "alert-rules.yml")])
    assert result.returncode == 0, result.stdout + result.stderr


def test_it_unit_tests_every_shipped_rule_with_promtool() -> None:
    tests = yaml.safe_load((PROM / "alert-rules.test.yml").read_text())
    tested: dict[str, list[bool]] = {}
    for case in tests["tests"]:
        for check in case["alert_rule_test"]:
            tested.setdefault(check["alertname"], []).append(bool(check["exp_alerts"]))
    for rule in shipped_rules():
        # each rule: once quiet (below threshold / inside `for`), once firing
        assert sorted(set(tested.get(rule, []))) == [False, True], rule
    result = run([need("promtool"), "test", "rules", "alert-rules.test.yml"], cwd=PROM)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.django_db
@override_settings(METRICS_PUBLIC=True)
def test_it_serves_metrics_that_pass_promtool_check_metrics(ingested: Any) -> None:  # noqa: F811
    text = Client().get("/metrics").content.decode()
    assert "npu_chip_info_temperature{" in text and "console_nodes{" in text
    result = run([need("promtool"), "check", "metrics"], input=text)
    problems = (result.stdout + result.stderr).strip()  # lint findings go to stderr
    assert result.returncode == 0 and not problems, problems
