"""``python -m engine.sim.docker_cli``: the fake ``docker`` (as ``engine/sim/bin/docker``)."""

from __future__ import annotations

import sys

from engine.sim.docker_cli.cli import main

sys.exit(main(sys.argv[1:]))
