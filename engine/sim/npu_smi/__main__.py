"""``python -m engine.sim.npu_smi``: the fake ``npu-smi`` (as ``engine/sim/bin/npu-smi``)."""

from __future__ import annotations

import sys

from engine.sim.npu_smi.cli import main

sys.exit(main(sys.argv[1:]))
