"""Copy third-party front-end files from node_modules/ (npm registry, package-lock.json) to static/vendor/.

Run by ``make setup``. Nothing third-party is committed: static/vendor/ is git-ignored.
Without Node.js the console still runs; pages that draw charts say what to install.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
# (file inside node_modules, destination inside static/vendor)
VENDOR_FILES = [
    ("uplot/dist/uPlot.iife.min.js", "uplot/uPlot.iife.min.js"),
    ("uplot/dist/uPlot.min.css", "uplot/uPlot.min.css"),
]


def main() -> int:
    modules = BASE_DIR / "node_modules"
    lock = BASE_DIR / "package-lock.json"
    missing = [src for src, _ in VENDOR_FILES if not (modules / src).exists()]
    if missing:
        npm = shutil.which("npm")
        if npm is None:
            print(
                "make setup: npm not found, so charts are unavailable; install Node.js + npm (Debian: apt-get install npm) and rerun make setup",
                file=sys.stderr,
            )
            return 0
        # npm ci installs exactly the versions in package-lock.json.
        argv = [
            npm,
            "ci" if lock.exists() else "install",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
        ]
        result = subprocess.run(argv, cwd=BASE_DIR, timeout=600)
        if result.returncode != 0:
            print(
                f"make setup: {' '.join(argv[1:2])} failed (exit {result.returncode}); charts are unavailable until it succeeds",
                file=sys.stderr,
            )
            return result.returncode
    for src, dest in VENDOR_FILES:
        target = BASE_DIR / "static" / "vendor" / dest
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(modules / src, target)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
