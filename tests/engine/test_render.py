from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.plans import NodePlan, build_plan
from engine.render import (
    render_env_file,
    render_shell,
    render_systemd_unit,
    systemd_quote,
)
from tests.engine.test_plans import demo_nodes, demo_profile

AWKWARD = [
    "--served-model-name",
    "qwen 3.5 (100% prod)",
    "--additional-config",
    '{"note": "it\'s $HOME and `x` and \\\\ back"}',
    "",
    "tab\there",
]

_C_UNESCAPE = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "\\": "\\",
    '"': '"',
    "'": "'",
    "s": " ",
}


def systemd_words(line: str) -> list[str]:
    """Split ExecStart= like systemd: specifiers, quotes, C escapes, then $$."""
    assert not re.search(r"%[^%]", line.replace("%%", "")), (
        "a lone % would be a systemd specifier"
    )
    line = line.replace("%%", "%")
    words: list[str] = []
    i = 0
    while i < len(line):
        if line[i].isspace():
            i += 1
            continue
        word, quote = "", None
        while i < len(line) and (quote or not line[i].isspace()):
            ch = line[i]
            if ch == "\\":
                word += _C_UNESCAPE[line[i + 1]]
                i += 2
                continue
            if quote is None and ch in "\"'":
                quote = ch
            elif ch == quote:
                quote = None
            else:
                word += ch
            i += 1
        assert quote is None, "unterminated quote"
        assert not re.search(r"\$[^$]", word.replace("$$", "")), (
            "a lone $ would be expanded"
        )
        words.append(word.replace("$$", "$"))
    return words


def exec_start(unit: str) -> str:
    [line] = [line for line in unit.splitlines() if line.startswith("ExecStart=")]
    return line[len("ExecStart=") :]


@pytest.fixture
def plan() -> NodePlan:
    node = build_plan("qwen35-prod", demo_nodes(), demo_profile()).nodes[1]
    node.argv += AWKWARD
    node.env["APP_NOTE"] = "a b $c 'd' \"e\" `f` 100%"
    return node


def test_it_writes_an_exec_start_systemd_reads_back_as_the_argv(plan: NodePlan) -> None:
    unit = render_systemd_unit(plan, env_file="/etc/vllm/ascend-02.env")
    assert systemd_words(exec_start(unit)) == plan.argv


def test_it_can_point_exec_start_at_an_absolute_vllm(plan: NodePlan) -> None:
    unit = render_systemd_unit(
        plan, env_file="/etc/vllm/ascend-02.env", executable="/opt/vllm/.venv/bin/vllm"
    )
    assert systemd_words(exec_start(unit)) == [
        "/opt/vllm/.venv/bin/vllm",
        *plan.argv[1:],
    ]


def test_it_writes_the_service_settings(plan: NodePlan) -> None:
    unit = render_systemd_unit(plan, user="npuops", env_file="/etc/vllm/ascend-02.env")
    for line in (
        "Type=simple",
        "Restart=always",
        "RestartSec=10",
        "User=npuops",
        "EnvironmentFile=/etc/vllm/ascend-02.env",
        "LimitNOFILE=1048576",
        "WantedBy=multi-user.target",
    ):
        assert line in unit.splitlines()


def test_it_refuses_a_relative_env_file_and_a_bad_user(plan: NodePlan) -> None:
    with pytest.raises(ValueError, match="absolute path"):
        render_systemd_unit(plan, env_file="ascend-02.env")
    with pytest.raises(ValueError, match="user"):
        render_systemd_unit(plan, user="root; rm", env_file="/etc/vllm/a.env")


def test_it_quotes_only_what_needs_quoting() -> None:
    assert systemd_quote("--tensor-parallel-size") == "--tensor-parallel-size"
    assert systemd_quote("127.0.1.1") == "127.0.1.1"
    assert systemd_quote("100%") == '"100%%"'
    assert systemd_quote("$HOME") == '"$$HOME"'
    assert systemd_quote("") == '""'
    # a trailing newline is no plain word ("$" in a regex would let it through)
    assert systemd_quote("0\n") == '"0\\n"'
    with pytest.raises(ValueError, match="control character"):
        systemd_quote("bell\a")


@given(
    st.lists(
        st.text(
            st.characters(blacklist_categories=("Cc", "Cs")) | st.sampled_from("\n\t")
        )
    )
)
def test_it_round_trips_any_argv_through_exec_start(words: list[str]) -> None:
    argv = ["/opt/vllm/bin/vllm", *words]
    line = " ".join(systemd_quote(word) for word in argv)
    assert systemd_words(line) == argv


def test_it_writes_a_shell_script_that_execs_the_argv_with_the_env(
    plan: NodePlan, tmp_path: Path
) -> None:
    probe = "import json, os, sys; print(json.dumps([sys.argv[1:], dict(os.environ)]))"
    runnable = NodePlan(
        plan.name,
        plan.rank,
        plan.role,
        [sys.executable, "-c", probe, *plan.argv[1:]],
        plan.env,
    )
    script = render_shell(runnable)
    assert script.splitlines()[:3] == [
        "#!/usr/bin/env bash",
        script.splitlines()[1],
        "set -euo pipefail",
    ]
    path = tmp_path / "start.sh"
    path.write_text(script, encoding="utf-8")
    out = subprocess.run(
        ["bash", str(path)], capture_output=True, text=True, timeout=60, check=True
    )
    argv, env = json.loads(out.stdout)
    assert argv == plan.argv[1:]
    assert {key: env[key] for key in plan.env} == plan.env


def test_it_writes_an_env_file_bash_and_systemd_read_back(
    plan: NodePlan, tmp_path: Path
) -> None:
    text = render_env_file(plan)
    assert 'HCCL_INTRA_PCIE_ENABLE="1"' in text.splitlines()
    path = tmp_path / "node.env"
    path.write_text(text, encoding="utf-8")
    probe = "import json, os; print(json.dumps(dict(os.environ)))"
    dump = f"set -a; source {path}; {sys.executable} -c '{probe}'"
    out = subprocess.run(
        ["bash", "-c", dump],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={},
    )
    env = json.loads(out.stdout)
    assert {key: env[key] for key in plan.env} == plan.env


def test_it_refuses_env_it_cannot_write(plan: NodePlan) -> None:
    plan.env["BAD"] = "two\nlines"
    with pytest.raises(ValueError, match="newline"):
        render_env_file(plan)
    with pytest.raises(ValueError, match="newline"):
        render_shell(plan)


ROOT_DROP = "head\n[Service]\nExecStartPre=+/bin/sh -c 'id > /tmp/pwned'"


@pytest.mark.parametrize("field", ["role", "name"])
def test_it_refuses_a_control_character_in_any_field_of_the_unit(
    plan: NodePlan, field: str
) -> None:
    setattr(plan, field, ROOT_DROP)
    with pytest.raises(ValueError, match="control character"):
        render_systemd_unit(plan, env_file="/etc/vllm/a.env")
    with pytest.raises(ValueError, match="control character"):
        render_env_file(plan)
    with pytest.raises(ValueError, match="control character"):
        render_shell(plan)


@pytest.mark.parametrize("bad", ["\r", "\x1b[2J", "\x7f", "\x00", "\t", "\x0b"])
def test_it_refuses_every_control_character_in_the_header_fields(
    plan: NodePlan, bad: str
) -> None:
    plan.role = "head" + bad
    with pytest.raises(ValueError, match="control character"):
        render_systemd_unit(plan, env_file="/etc/vllm/a.env")


def test_it_refuses_a_tab_in_an_env_value_of_the_env_file(plan: NodePlan) -> None:
    plan.env["APP_NOTE"] = "a\tb"
    with pytest.raises(ValueError, match="control character"):
        render_env_file(plan)


@given(
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=20),
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=20),
)
def test_no_rendered_line_ever_carries_a_control_character(
    role: str, value: str
) -> None:
    node = build_plan("qwen35-prod", demo_nodes(), demo_profile()).nodes[1]
    node.role = role
    node.env["APP_NOTE"] = value
    node.argv.append(value)
    for render in (
        lambda p: render_systemd_unit(p, env_file="/etc/vllm/a.env"),
        render_env_file,
        render_shell,
    ):
        try:
            text = render(node)
        except ValueError:
            continue
        assert not any(
            ord(ch) < 0x20 or ord(ch) == 0x7F
            for line in text.split("\n")
            for ch in line
        )
        assert text.count("[Service]") <= 1


def test_it_writes_control_characters_of_the_argv_as_bash_escapes(
    plan: NodePlan, tmp_path: Path
) -> None:
    probe = "import json, sys; print(json.dumps(sys.argv[1:]))"
    words = ["tab\there", "bell\a", "it's \\ $x", "nl\nx"]
    runnable = NodePlan(
        plan.name, plan.rank, plan.role, [sys.executable, "-c", probe, *words], {}
    )
    path = tmp_path / "start.sh"
    path.write_text(render_shell(runnable), encoding="utf-8")
    out = subprocess.run(
        ["bash", str(path)], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(out.stdout) == words
