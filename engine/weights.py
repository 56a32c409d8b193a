"""The model directory as a node holds it: a manifest to compare across nodes, sha256 on demand.

Weights that differ or are corrupt on one node are a reported start problem
(vllm-project/vllm-ascend issue 955): vLLM then fails late in a 20-minute load, or
serves wrong answers. The manifest is cheap (stat only): every file's size, whether
``model.safetensors.index.json``'s ``weight_map`` names only shards that exist
(Hugging Face's sharded-checkpoint index: ``{"metadata": {"total_size"}, "weight_map":
{tensor: file}}``), and ``config.json`` parsed. Hashes are computed only when asked,
read in bounded chunks at a bounded rate, and cached by (size, mtime).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine import checktext
from engine.checktext import item, text
from engine.memory import model_facts_from_config

INDEX = "model.safetensors.index.json"
CHUNK = 1 << 20
# files a model directory may carry that differ harmlessly between nodes
IGNORED = (".cache/", ".git/", "__pycache__/")


def _files(root: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if any(rel.startswith(i) or f"/{i}" in rel for i in IGNORED):
            continue
        if p.is_file():
            out[rel] = p.stat().st_size
    return out


def _config(root: Path) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """config.json's facts for the fit estimate, plus dtype and quantization; (None, why)."""
    path = root / "config.json"
    if not path.is_file():
        return None, item("item.no_config")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        facts: dict[str, Any] = dict(model_facts_from_config(str(root)) or {})
    except ValueError as exc:
        return None, item("item.config_unreadable", error=str(exc))
    text = raw.get("text_config") if isinstance(raw.get("text_config"), dict) else {}
    facts["architectures"] = list(raw.get("architectures") or [])
    facts["dtype"] = raw.get("torch_dtype") or raw.get("dtype") or text.get("dtype")
    quant = raw.get("quantization_config")
    facts["quantization"] = (
        quant.get("quant_method") if isinstance(quant, dict) else None
    )
    return facts, None


def _index(root: Path, files: dict[str, int]) -> dict[str, Any] | None:
    path = root / INDEX
    if not path.is_file():
        return None
    try:
        weight_map = json.loads(path.read_text(encoding="utf-8"))["weight_map"]
        shards = sorted(set(weight_map.values()))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return {
            "shards": [],
            "missing": [],
            "error": item("item.index_unreadable", index=INDEX, error=str(exc)),
        }
    return {"shards": shards, "missing": [s for s in shards if s not in files]}


def manifest(path: str | Path) -> dict[str, Any]:
    """The directory's manifest: {"path", "exists", "files": {rel: size}, "total_bytes",
    "config": {...} | None, "index": {"shards", "missing"} | None, "problems": [...]};
    ``problem_items`` holds the problems as items of engine/checktext.py."""
    root = Path(path)
    if not root.is_dir():
        return {
            "path": str(path),
            "exists": False,
            "files": {},
            "total_bytes": 0,
            "config": None,
            "index": None,
            "problems": [f"{path} does not exist"],
            "problem_items": [item("item.path_missing", path=str(path))],
        }
    files = _files(root)
    config, why = _config(root)
    index = _index(root, files)
    problems = [why] if why else []
    if index is not None:
        if index.get("error"):
            problems.append(index["error"])
            index["error"] = text(index["error"])
        if index["missing"]:
            problems.append(
                item(
                    "item.shards_missing",
                    index=INDEX,
                    count=len(index["missing"]),
                    shards=", ".join(index["missing"][:5]),
                )
            )
    elif not any(f.endswith(".safetensors") for f in files):
        problems.append(item("item.no_weights"))
    return {
        "path": str(path),
        "exists": True,
        "files": files,
        "total_bytes": sum(files.values()),
        "config": config,
        "index": index,
        "problems": [text(p) for p in problems],
        "problem_items": problems,
    }


def check(m: dict[str, Any]) -> dict[str, Any]:
    """A preflight check dict for one node's manifest (engine/checktext.py)."""
    if m["problems"]:
        return checktext.check(
            "model_files.bad",
            "fail",
            path=m["path"],
            problems=checktext.join(m.get("problem_items") or m["problems"]),
        )
    shards = len(m["index"]["shards"]) if m["index"] else 0
    return checktext.check(
        "model_files.ok",
        "pass",
        path=m["path"],
        files=len(m["files"]),
        bytes=m["total_bytes"],
        shards=shards,
    )


def compare(manifests: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """Differences per node against the majority: {node: ["file: size X here, Y on most"]}.

    A file missing on a node, extra on it, or of another size (or sha256, where both
    sides have one) is named. Nodes that agree with the majority get no entry.
    """
    return {
        node: [text(i) for i in items]
        for node, items in compare_items(manifests).items()
    }


def compare_items(
    manifests: dict[str, dict[str, Any]],
) -> dict[str, list[dict[str, Any]]]:
    """``compare`` as items of engine/checktext.py (shown in the reader's language)."""
    if len(manifests) < 2:
        return {}
    names = sorted({f for m in manifests.values() for f in m["files"]})
    out: dict[str, list[dict[str, Any]]] = {}
    for name in names:
        sizes = Counter(m["files"].get(name) for m in manifests.values())
        common, _ = sizes.most_common(1)[0]
        for node, m in manifests.items():
            have = m["files"].get(name)
            if have == common:
                digest = (m.get("sha256") or {}).get(name)
                others = Counter(
                    (o.get("sha256") or {}).get(name)
                    for o in manifests.values()
                    if (o.get("sha256") or {}).get(name)
                )
                usual = str(others.most_common(1)[0][0]) if others else ""
                if digest and usual and digest != usual:
                    out.setdefault(node, []).append(
                        item(
                            "item.file_sha256",
                            file=name,
                            digest=digest[:12],
                            usual=usual[:12],
                        )
                    )
                continue
            if have is None:
                one = item("item.file_missing", file=name, size=common)
            elif common is None:
                one = item("item.file_only_here", file=name, size=have)
            else:
                one = item("item.file_size", file=name, size=have, common=common)
            out.setdefault(node, []).append(one)
    return out


class HashCache:
    """sha256 per file, cached in a JSON file by (size, mtime_ns); bounded read rate."""

    def __init__(self, cache_file: Path, *, max_mb_s: float = 0.0) -> None:
        self.cache_file = cache_file
        self.max_mb_s = max_mb_s  # 0 = unbounded; chunks are always CHUNK bytes
        self.reads = 0  # files read (not answered from the cache) by this instance
        try:
            self.entries: dict[str, Any] = json.loads(cache_file.read_text("utf-8"))
        except (OSError, ValueError):
            self.entries = {}

    def _save(self) -> None:
        self.cache_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.cache_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.entries), encoding="utf-8")
        os.replace(tmp, self.cache_file)

    def digest(
        self, path: Path, progress: Callable[[int, int], None] | None = None
    ) -> str:
        st = path.stat()
        key = str(path.resolve())
        hit = self.entries.get(key)
        if hit and hit["size"] == st.st_size and hit["mtime_ns"] == st.st_mtime_ns:
            return str(hit["sha256"])
        self.reads += 1
        h = hashlib.sha256()
        done = 0
        started = time.monotonic()
        with path.open("rb") as f:
            while chunk := f.read(CHUNK):
                h.update(chunk)
                done += len(chunk)
                if progress:
                    progress(done, st.st_size)
                if self.max_mb_s > 0:
                    ahead = done / (self.max_mb_s * 1e6) - (time.monotonic() - started)
                    if ahead > 0:
                        time.sleep(ahead)
        value = h.hexdigest()
        self.entries[key] = {
            "size": st.st_size,
            "mtime_ns": st.st_mtime_ns,
            "sha256": value,
        }
        self._save()
        return value


class HashProgress:
    """Bytes hashed over the whole directory, for ``report(state)`` at most every
    ``every_s`` seconds (and once at the end): ``file``, ``done``/``total`` bytes,
    ``files_done``/``files``, ``cached`` (files answered from the cache, no IO) and
    ``bytes_read`` (what was actually read)."""

    def __init__(
        self,
        sizes: dict[str, int],
        report: Callable[[dict[str, Any]], None] | None = None,
        *,
        every_s: float = 0.5,
    ) -> None:
        self.state: dict[str, Any] = {
            "file": "",
            "done": 0,
            "total": sum(sizes.values()),
            "files_done": 0,
            "files": len(sizes),
            "cached": 0,
            "bytes_read": 0,
        }
        self._report = report
        self._every_s = every_s
        self._last = 0.0
        self._base = 0

    def _emit(self, force: bool = False) -> None:
        now = time.monotonic()
        if self._report and (force or now - self._last >= self._every_s):
            self._last = now
            self._report(dict(self.state))

    def file_started(self, rel: str) -> Callable[[int, int], None]:
        self.state["file"] = rel
        self._base = self.state["done"]

        def step(done: int, size: int) -> None:
            self.state["done"] = self._base + done
            self._emit()

        return step

    def file_done(self, size: int, *, cached: bool) -> None:
        self.state["done"] = self._base + size
        self.state["files_done"] += 1
        self.state["cached"] += int(cached)
        if not cached:
            self.state["bytes_read"] += size
        self._emit(force=self.state["files_done"] == self.state["files"])


def hash_manifest(
    path: str | Path,
    cache: HashCache,
    report: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[dict[str, str], dict[str, Any]]:
    """sha256 of every file of the directory (cached by size and mtime) and the final
    progress state; ``report(state)`` is called as the bytes go by (HashProgress)."""
    root = Path(path)
    sizes = _files(root)
    progress = HashProgress(sizes, report)
    out: dict[str, str] = {}
    for rel, size in sizes.items():
        step = progress.file_started(rel)
        before = cache.reads
        out[rel] = cache.digest(root / rel, step)
        progress.file_done(size, cached=cache.reads == before)
    return out, progress.state


def declared_disagreements(
    declared: dict[str, Any], config: dict[str, Any] | None
) -> list[str]:
    """Profile figures (num_layers, num_experts, …) that config.json contradicts."""
    return [text(i) for i in disagreement_items(declared, config)]


def disagreement_items(
    declared: dict[str, Any], config: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """``declared_disagreements`` as items of engine/checktext.py."""
    if not config:
        return []
    return [
        item("item.profile_says", key=key, declared=declared[key], found=config[key])
        for key in (
            "num_layers",
            "hidden_size",
            "num_experts",
            "num_kv_heads",
            "head_dim",
            "kv_layers",
        )
        if declared.get(key) and config.get(key) and declared[key] != config[key]
    ]
