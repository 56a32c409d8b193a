"""The preflight's model walk stays under the models root: a message naming / or /etc
cannot make the agent read (and size) the whole disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.preflight import FAIL, PASS, check_model


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    models = tmp_path / "models"
    (models / "qwen").mkdir(parents=True)
    (models / "qwen" / "config.json").write_text("{}")
    (models / "qwen" / "w.safetensors").write_bytes(b"x" * 1000)
    outside = tmp_path / "secrets"
    outside.mkdir()
    (outside / "config.json").write_text("{}")
    (models / "escape").symlink_to(outside)
    monkeypatch.setenv("AGENT_MODELS_ROOT", str(models))
    monkeypatch.delenv("ENGINE_DRIVER", raising=False)
    monkeypatch.delenv("SIM_STATE_DIR", raising=False)
    return models


def test_it_sizes_a_model_under_the_root(root: Path) -> None:
    check, size, _ = check_model(str(root / "qwen"))
    assert check.status == PASS and size == 1002


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/etc",
        "{root}",
        "{root}/../secrets",
        "{root}/escape",
        "models/qwen",
        "{root}/..",
    ],
)
def test_it_refuses_a_path_outside_the_root(root: Path, path: str) -> None:
    check, size, _ = check_model(path.format(root=root))
    assert check.status == FAIL and size is None
    assert "AGENT_MODELS_ROOT" in check.fix
