"""vllm-ascend's release compatibility matrix and image names, and the check against them.

The data is ``engine/vllm_ascend_releases.json``, copied from vllm-ascend's
``docs/source/community/versioning_policy.md`` ("Release compatibility matrix") and
``docs/source/installation.md`` ("Set up using Docker": A2 images carry no suffix,
A3 images ``-a3``, openEuler images ``-openeuler``), at the commit named in its
``_source``. Version mismatches between CANN, torch_npu and vllm-ascend are among the
most reported start problems (vllm-project/vllm-ascend issues 5710, 7587, 9672).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from engine import checktext

DATA = Path(__file__).with_name("vllm_ascend_releases.json")
# keys of a node's reported versions (engine.preflight.versions) checked against a row
CHECKED = ("vllm_ascend", "vllm", "cann", "torch_npu")
HARDWARE = ("a2", "a3")
IMAGE_OS = ("ubuntu", "openeuler")


@dataclass(frozen=True)
class Release:
    """One row of the matrix: what a vllm-ascend release is built and tested with."""

    vllm_ascend: str
    vllm: tuple[str, ...]
    python: str
    cann: str
    torch: str
    torch_npu: str
    triton_ascend: str | None
    mooncake: str | None

    def needed(self) -> dict[str, str]:
        """The versions a node must report for this release (key → version text)."""
        return {
            "vllm_ascend": self.vllm_ascend,
            "vllm": " or ".join(self.vllm),
            "cann": self.cann,
            "torch_npu": self.torch_npu,
        }


@cache
def _data() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
    return data


def source() -> dict[str, str]:
    """Where the matrix was copied from (file, commit)."""
    return dict(_data()["_source"])


@cache
def releases() -> dict[str, Release]:
    """Every known release by its version without the leading ``v`` (newest first)."""
    out: dict[str, Release] = {}
    for row in _data()["releases"]:
        out[row["vllm_ascend"]] = Release(**{**row, "vllm": tuple(row["vllm"])})
    return out


def normalize(version: str | None) -> str:
    """``v0.23.0`` → ``0.23.0``; a PEP 440 local part (``+cpu``) is kept only if present in both."""
    return (version or "").strip().lstrip("vV")


def release(version: str) -> Release | None:
    return releases().get(normalize(version))


def image(version: str, hardware: str, os_name: str = "ubuntu") -> str:
    """The image vllm-ascend publishes for ``version`` on ``hardware`` (a2/a3).

    Tags carry the leading ``v`` (docs: ``quay.io/ascend/vllm-ascend:v0.11.0rc1-a3``).
    Raises ValueError naming the allowed values.
    """
    data = _data()
    if release(version) is None:
        raise ValueError(
            f"vllm-ascend {version!r} is not in the release matrix; known: "
            + ", ".join(releases())
        )
    suffixes = data["image_suffixes"]
    if hardware not in suffixes:
        raise ValueError(
            f"hardware {hardware!r} has no vllm-ascend image; use one of: {', '.join(suffixes)}"
        )
    if os_name not in suffixes[hardware]:
        raise ValueError(
            f"image OS {os_name!r} unknown; use one of: {', '.join(suffixes[hardware])}"
        )
    return (
        f"{data['image_repository']}:v{normalize(version)}{suffixes[hardware][os_name]}"
    )


def _same(found: str, needed: str) -> bool:
    f, n = normalize(found), normalize(needed)
    if "+" in f and "+" not in n:
        f = f.split("+", 1)[0]  # a local build tag the matrix does not name
    return f == n


def _other_releases(key: str, value: str) -> list[str]:
    return [
        r.vllm_ascend
        for r in releases().values()
        if key != "vllm" and _same(value, getattr(r, key))
    ]


def mismatches(found: dict[str, Any], target: str) -> list[str]:
    """What a node's reported versions lack for vllm-ascend ``target``.

    Each item names the key, the version found and the version needed, and — where the
    found version belongs to other releases — which ones. [] when all match.
    """
    rel = release(target)
    if rel is None:
        return [
            f"vllm-ascend {target!r} is not in the release matrix "
            f"({source()['commit'][:12]}); known: {', '.join(list(releases())[:8])}, …"
        ]
    return [checktext.text(i) for i in mismatch_items(found, rel)]


def mismatch_items(found: dict[str, Any], rel: Release) -> list[dict[str, Any]]:
    """``mismatches`` as items of engine/checktext.py (shown in the reader's language)."""
    out = []
    for key in CHECKED:
        have = found.get(key)
        if key == "vllm":
            ok = have is not None and any(_same(str(have), v) for v in rel.vllm)
        else:
            ok = have is not None and _same(str(have), getattr(rel, key))
        if ok:
            continue
        one = checktext.item(
            "item.release_needs",
            key=key,
            have=have or checktext.item("item.not_found"),
            release=rel.vllm_ascend,
            want=rel.needed()[key],
        )
        others = _other_releases(key, str(have)) if have else []
        if others:
            one = checktext.item(
                "item.release_belongs",
                mismatch=one,
                have=have,
                others=", ".join(others[:4]),
            )
        out.append(one)
    return out


def check(found: dict[str, Any], target: str = "") -> dict[str, Any]:
    """A preflight check dict (name/status/evidence/fix) for one node.

    ``target`` is the profile's vllm-ascend version; empty = the vllm-ascend the node
    has installed (then the check is that the node's own stack is one release's).
    """
    target = normalize(target) or normalize(found.get("vllm_ascend"))
    if not target:
        return checktext.check("release_matrix.none", "warn")
    wrong = mismatches(found, target)
    if wrong:
        rel = release(target)
        if rel is None:  # the sentence mismatches() writes, with its parts as params
            return checktext.check(
                "release_matrix.unknown",
                "fail",
                target=repr(target),
                commit=source()["commit"][:12],
                known=", ".join(list(releases())[:8]),
            )
        return checktext.check(
            "release_matrix.wrong",
            "fail",
            problems=checktext.join(mismatch_items(found, rel)),
            target=target,
            cann=rel.cann,
            torch_npu=rel.torch_npu,
            image_a2=image(target, "a2"),
            image_a3=image(target, "a3"),
        )
    rel = release(target)
    assert rel is not None
    return checktext.check(
        "release_matrix.ok",
        "pass",
        target=target,
        cann=rel.cann,
        torch_npu=rel.torch_npu,
        vllm=" / ".join(rel.vllm),
    )
