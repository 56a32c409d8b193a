"""The web process: uvicorn, waking its loop once a second instead of ten times.

    python -m console.serve console.asgi:application [uvicorn's options]

Every option is uvicorn's own (``--help`` lists them). What differs is uvicorn's
housekeeping loop (``Server.main_loop`` in uvicorn/server.py, 0.54.0): it sleeps
0.1 s, then calls ``on_tick``, which refreshes the ``Date`` header on every tenth
call and returns whether to stop. Here the loop waits up to a second for a wake-up
that a stop signal sends. Measured on the 2-core development VM (README,
"Performance"): an idle web process wakes 1.0 times a second instead of 10.1 and
spends 0.35 ms of CPU a second instead of 2.14; one stream at a time, the gateway
spends 1-2 ms less CPU per request. And:

- the ``Date`` header is refreshed once a second, as under uvicorn;
- SIGINT / SIGTERM stop the server at once (uvicorn notices them at its next tick,
  up to 0.1 s later);
- ``--limit-max-requests`` is checked once a second instead of ten times.

uvicorn's command line constructs its server from the name ``Server`` in the module
``uvicorn.main``, and each ``--workers`` child from the same name in
``uvicorn.supervisors.multiprocess``. :func:`install` points both at :class:`Server`,
only in a process started as ``python -m console.serve``: the program itself, and
the worker children, which multiprocessing's spawn start method begins by importing
this module as ``__mp_main__``.
"""

from __future__ import annotations

import asyncio
import importlib
from types import FrameType
from typing import Any

import uvicorn

TICK_S = 1.0
# uvicorn's on_tick refreshes the Date header when the counter is a multiple of this
_DATE_EVERY = 10
_COUNTER_WRAP = 864000  # as uvicorn's main_loop


class Server(uvicorn.Server):
    """uvicorn's server with a one-second tick that a stop signal cuts short."""

    _wake: asyncio.Event | None = None
    _loop: asyncio.AbstractEventLoop | None = None

    async def main_loop(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + _DATE_EVERY) % _COUNTER_WRAP
            try:
                await asyncio.wait_for(self._wake.wait(), TICK_S)
            except TimeoutError:
                pass
            should_exit = await self.on_tick(counter)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None and not loop.is_closed():
            # a signal handler runs between two bytecodes of the loop's thread: hand
            # the wake-up to the loop rather than touch its futures from here
            loop.call_soon_threadsafe(wake.set)


_CONSTRUCTED_IN = ("uvicorn.main", "uvicorn.supervisors.multiprocess")


def install() -> None:
    # importlib: the attribute ``uvicorn.main`` is the click command, not the module
    for name in _CONSTRUCTED_IN:
        module: Any = importlib.import_module(name)
        module.Server = Server


def main() -> None:
    install()
    command: Any = importlib.import_module("uvicorn.main").main
    # uvicorn's command has no description of its own: say what this one is
    command.help = __doc__.split("\n\n")[0] + " Every option is uvicorn's own."
    command.main(prog_name="python -m console.serve")


if __name__ == "__mp_main__":  # a --workers child: see the module's docstring
    install()
elif __name__ == "__main__":
    main()
