"""Dependencies run one way: monitoring → console → engine (README "Architecture").

Walks every import statement of the tree (module level and inside functions, since a
function-local import is a dependency too) and fails naming the file and line that
points the wrong way:
- console/ imports nothing of monitoring/, except the project wiring (settings, root
  URLconf, ASGI routing), which names every app; a dotted-path string such as
  ``include("monitoring.api")`` counts as an import;
- engine/ imports no Django (nor console/, monitoring/): it runs on the NPU nodes;
- engine/ reaches the simulator only through the driver registry: outside engine/sim/
  itself and its driver (engine/drivers/sim.py), no module imports ``engine.sim``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The project wiring may name every app (STYLE §1: settings · asgi · urls · routing).
WIRING = {
    "console/settings.py",
    "console/urls.py",
    "console/asgi.py",
    "console/routing.py",
}
# The driver registry's sim entry: the one module outside engine/sim/ that imports the sim.
SIM_PLUGIN = {"engine/drivers/sim.py"}
ENGINE_FORBIDDEN = ("django", "channels", "rest_framework", "console", "monitoring")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, package: str | None = None) -> Iterator[tuple[int, str]]:
    """(line, absolute dotted name) of every import in ``path``, relative ones resolved."""
    tree = ast.parse(path.read_text(), filename=str(path))
    if package is None:
        package = _module_name(path)
        if path.name != "__init__.py":
            package = package.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            yield node.lineno, module
            for alias in node.names:  # `from engine import sim` imports engine.sim
                yield node.lineno, f"{module}.{alias.name}"


def _dotted_strings(path: Path, prefix: str) -> Iterator[tuple[int, str]]:
    """String constants naming a module of ``prefix`` (``include("monitoring.api")``)."""
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.startswith(prefix + ".")
            and " " not in node.value
        ):
            yield node.lineno, node.value


def _is(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _files(top: str) -> list[Path]:
    return sorted(p for p in (ROOT / top).rglob("*.py") if "migrations" not in p.parts)


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _one_per_line(found: list[str]) -> list[str]:
    seen: dict[str, str] = {}
    for item in sorted(found):
        seen.setdefault(item.split(" ")[0], item)
    return list(seen.values())


def console_to_monitoring() -> list[str]:
    found = []
    for path in _files("console"):
        if _rel(path) in WIRING:
            continue
        for line, module in _imports(path):
            if _is(module, "monitoring"):
                found.append(f"{_rel(path)}:{line} imports {module}")
        for line, value in _dotted_strings(path, "monitoring"):
            found.append(f"{_rel(path)}:{line} names {value!r}")
    return _one_per_line(found)


def engine_to_django() -> list[str]:
    found = []
    for path in _files("engine"):
        for line, module in _imports(path):
            if any(_is(module, p) for p in ENGINE_FORBIDDEN):
                found.append(f"{_rel(path)}:{line} imports {module}")
    return _one_per_line(found)


def engine_to_sim() -> list[str]:
    found = []
    for path in _files("engine"):
        if _is(_module_name(path), "engine.sim") or _rel(path) in SIM_PLUGIN:
            continue
        for line, module in _imports(path):
            if _is(module, "engine.sim"):
                found.append(f"{_rel(path)}:{line} imports {module}")
    return _one_per_line(found)


def test_it_finds_no_console_module_importing_monitoring() -> None:
    found = console_to_monitoring()
    assert found == [], "\n".join(found)


def test_it_finds_no_engine_module_importing_django() -> None:
    found = engine_to_django()
    assert found == [], "\n".join(found)


def test_it_finds_no_engine_module_reaching_into_the_sim_outside_the_registry() -> None:
    found = engine_to_sim()
    assert found == [], "\n".join(found)


def test_it_sees_imports_inside_functions_and_relative_ones(tmp_path: Path) -> None:
    """The walker itself: a function-local and a relative import are both found."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "def f():\n    from engine.sim.state import node_dir\n    from . import sim\n"
    )
    found = [m for _, m in _imports(probe, package="engine")]
    assert "engine.sim.state" in found and "engine.sim" in found


def unexplained_local_imports() -> list[str]:
    """Imports of the project's own modules inside a function, with no comment on the
    line or the two above it saying why they cannot sit at the top (issue 14)."""
    found = []
    for top in ("console", "engine", "monitoring"):
        for path in _files(top):
            if "migrations" in path.parts:
                continue
            lines = path.read_text().splitlines()
            for fn in ast.walk(ast.parse("\n".join(lines))):
                if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                for node in ast.walk(fn):
                    if isinstance(node, ast.ImportFrom):
                        module = node.module or ""
                    elif isinstance(node, ast.Import):
                        module = node.names[0].name
                    else:
                        continue
                    if module.split(".")[0] not in ("console", "engine", "monitoring"):
                        continue
                    context = lines[max(0, node.lineno - 3) : node.lineno]
                    if not any("#" in line for line in context):
                        found.append(f"{_rel(path)}:{node.lineno} imports {module}")
    return found


def test_it_finds_no_unexplained_function_local_import() -> None:
    assert unexplained_local_imports() == []
