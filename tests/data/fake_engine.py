"""Stand-in for `vllm serve` in driver tests: prints lines, spawns a child, sleeps.

usage: fake_engine.py [--exit CODE] [--ignore-term] [--child-ignore-term]
                      [--pidfile PATH]
--exit CODE          print an error line and exit with CODE right away
--ignore-term        the main process ignores SIGTERM (stop must escalate to SIGKILL)
--child-ignore-term  the child ignores SIGTERM
--pidfile PATH       write "<main pid> <child pid>" to PATH once both run
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

p = argparse.ArgumentParser()
p.add_argument("--exit", type=int, default=None)
p.add_argument("--ignore-term", action="store_true")
p.add_argument("--child-ignore-term", action="store_true")
p.add_argument("--pidfile", default=None)
args = p.parse_args()

print(
    f"INFO fake engine starting pid={os.getpid()} "
    f"FAKE_MARK={os.environ.get('FAKE_MARK', '')}",
    flush=True,
)
if args.exit is not None:
    print(
        "ERROR fake engine: RuntimeError: Did not receive response from front-end "
        "process within 5 minutes",
        flush=True,
    )
    sys.exit(args.exit)
if args.ignore_term:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
child_code = "import signal, time\n"
if args.child_ignore_term:
    child_code += "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
child_code += "time.sleep(3600)\n"
child = subprocess.Popen([sys.executable, "-c", child_code])
if args.pidfile:
    with open(args.pidfile + ".tmp", "w") as f:
        f.write(f"{os.getpid()} {child.pid}\n")
    os.replace(args.pidfile + ".tmp", args.pidfile)
for i in range(3):
    print(f"INFO fake engine line {i}", flush=True)
while True:
    time.sleep(3600)
