"""The README's configuration tables cover every variable the code reads, and the
deploy/ examples only set variables that exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
READ = re.compile(
    r"""(?:env_int|env_bool|env_secret|env\.list|env\.db_url|os\.environ\.get|environ\.get|env\.get|os\.getenv)\(\s*["']([A-Z][A-Z0-9_]+)["']"""
)
INTERNAL = {
    "PATH",
    "PYTHONPATH",
    "SIM_NODE",
    "SIM_PYTHON",
    "_SIM_REEXEC",
    "HCCL_INTRA_ROCE_ENABLE",
    "CONSOLE_NODE_NAME",
    "DJANGO_SETTINGS_MODULE",
    "OPENAI_API_KEY",  # what vllm bench serve reads; the agent sets it for the run
}


def documented() -> set[str]:
    text = (ROOT / "README.md").read_text()
    return set(re.findall(r"`([A-Z][A-Z0-9_]+)`", text))


def read_by_code() -> set[str]:
    names: set[str] = set()
    for package in ("console", "engine", "monitoring"):
        for path in (ROOT / package).rglob("*.py"):
            names.update(READ.findall(path.read_text()))
    return names - INTERNAL


def test_every_variable_the_code_reads_is_in_the_readme() -> None:
    missing = sorted(read_by_code() - documented())
    assert not missing, f"add these to README.md's configuration tables: {missing}"


def test_deploy_examples_set_only_known_variables() -> None:
    known = read_by_code() | {name.removesuffix("_FILE") for name in documented()}
    for example in (ROOT / "deploy").glob("*.env.example"):
        for line in example.read_text().splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                name = line.split("=", 1)[0].strip()
                assert name.removesuffix("_FILE") in known, (
                    f"{example.name}: {name} is read by nothing"
                )


def test_each_variable_has_one_row_per_table() -> None:
    """Two rows for one variable end up saying two things (WEB_CONCURRENCY did: 2 and 1).
    The console's and the node agent's tables may each have theirs."""
    tables = re.findall(r"(?:^\|.*\n)+", (ROOT / "README.md").read_text(), re.M)
    for table in tables:
        rows = re.findall(r"^\| `([A-Z][A-Z0-9_]+)`", table, re.M)
        twice = sorted({name for name in rows if rows.count(name) > 1})
        assert not twice, f"a README.md table lists these more than once: {twice}"
