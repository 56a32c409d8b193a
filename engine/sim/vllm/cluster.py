"""Multi-node rendezvous, shaped like vLLM's DP handshake (loopback TCP, JSON lines).

The head binds the RPC port (``--data-parallel-rpc-port`` or, with ``--nnodes``,
``--master-port``) and waits for the remote ranks. A headless rank connects (retrying,
as a ZMQ DEALER would), says HELLO with its ranks, node, link mode and HCCS loss, gets
the init reply, loads, says READY and then sends a heartbeat every 0.5 s. The head
sends each rank its load and, when it stops cleanly, SHUTDOWN; a head that dies just
closes the socket and the headless rank exits non-zero.

Like vLLM's ``wait_for_engine_startup`` (vllm/v1/engine/utils.py), the head logs each
DP engine's HELLO and READY at DEBUG ("HELLO from remote core engine process 1.");
the "Waiting for … core engine proc(s) …" poll lines are node.py's. Node ranks of
``--nnodes`` mode join torch.distributed in vLLM, not this handshake: no such lines.

Messages (one JSON object per line), headless → head:
``{"type": "hello", "ranks": [1], "node": "ascend-02", "link_mode": "hccs",
"hccs_loss_pct": 0.0}``,
``{"type": "ready"}``, ``{"type": "hb", "link_mode": ..., "hccs_loss_pct": ...}``
(hello and hb also carry ``"garbled": bool``, the sim's garbled fault);
head → headless: ``{"type": "init"}``, ``{"type": "reject", "reason": ...}``,
``{"type": "load", "load": 0.5}``, ``{"type": "shutdown"}``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from engine.sim.vllm.logs import VllmLog

HEARTBEAT_S = 0.5
# where vLLM logs the handshake messages (vllm/v1/engine/utils.py)
HANDSHAKE_AT = "v1/engine/utils.py:944"


def _encode(msg: dict[str, Any]) -> bytes:
    return (json.dumps(msg) + "\n").encode()


async def read_messages(reader: asyncio.StreamReader) -> AsyncIterator[Any]:
    """The peer's messages, one JSON object a line, until it closes the connection
    (or it breaks); a line that is not JSON is skipped."""
    while True:
        try:
            line = await reader.readline()
        except OSError:
            line = b""
        if not line:
            return
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        yield msg


@dataclass
class Peer:
    """One connected headless process."""

    ranks: list[int]
    node: str
    link_mode: str
    loss_pct: float
    writer: asyncio.StreamWriter
    loaded: bool = False
    garbled: bool = False


class HeadRendezvous:
    """The head's side: accepts the expected remote ranks, watches their sockets."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        expected: list[int],
        log: VllmLog,
        on_peer_change: Callable[[Peer | None], None],
        on_dead: Callable[[str], None],
        dp_handshake: bool = True,
    ) -> None:
        self.host = host
        self.port = port
        self.expected = expected
        self.log = log
        self.on_peer_change = on_peer_change  # called with a peer on join/heartbeat
        self.on_dead = on_dead  # called with a reason when a joined rank drops
        self.dp_handshake = dp_handshake  # False: --nnodes node ranks, not DP engines
        self.news = asyncio.Event()  # set on every HELLO and READY
        self.peers: list[Peer] = []
        self.closing = False
        self._server: asyncio.Server | None = None

    @property
    def joined_ranks(self) -> list[int]:
        return sorted(r for p in self.peers for r in p.ranks)

    @property
    def all_joined(self) -> bool:
        return set(self.expected) <= set(self.joined_ranks)

    @property
    def all_loaded(self) -> bool:
        return self.all_joined and all(p.loaded for p in self.peers)

    @property
    def unconnected(self) -> int:
        """Remote ranks that have not said HELLO yet."""
        return len(set(self.expected) - set(self.joined_ranks))

    @property
    def unready(self) -> int:
        """Remote ranks connected but not READY yet."""
        return sum(len(p.ranks) for p in self.peers if not p.loaded)

    async def start(self) -> None:
        """Bind the handshake socket; raises OSError if the address is taken."""
        # rank 0 must bind before headless ranks; they give up after 5 min
        self._server = await asyncio.start_server(self._handle, self.host, self.port)

    def send_load(self, load_of: Callable[[int], float]) -> None:
        """Tell every headless process the mean load of its ranks."""
        for p in self.peers:
            load = sum(load_of(r) for r in p.ranks) / max(len(p.ranks), 1)
            self._send(p.writer, {"type": "load", "load": load})

    async def shutdown(self) -> None:
        """Clean stop: tell every headless rank to exit 0, then close."""
        self.closing = True
        for p in self.peers:
            self._send(p.writer, {"type": "shutdown"})
        for p in self.peers:
            try:
                await asyncio.wait_for(p.writer.drain(), 1.0)
            except (TimeoutError, OSError):
                pass
            p.writer.close()
        if self._server is not None:
            self._server.close()

    def _handshake(self, status: str, ranks: list[int]) -> None:
        """vLLM's DEBUG line per handshake message, and news for the startup poll."""
        if self.dp_handshake:
            for r in ranks:
                self.log.debug(
                    HANDSHAKE_AT, f"{status} from remote core engine process {r}."
                )
        self.news.set()

    @staticmethod
    def _send(writer: asyncio.StreamWriter, msg: dict[str, Any]) -> None:
        if not writer.is_closing():
            writer.write(_encode(msg))

    async def _handle(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            hello = json.loads(await asyncio.wait_for(reader.readline(), 10.0) or b"{}")
        except (TimeoutError, ValueError, OSError):
            writer.close()
            return
        ranks = (
            [int(r) for r in hello.get("ranks", [])]
            if hello.get("type") == "hello"
            else []
        )
        taken = set(self.joined_ranks)
        bad = [r for r in ranks if r not in self.expected or r in taken]
        if not ranks or bad:
            reason = (
                f"rank(s) {bad or ranks} not expected "
                f"(expected {self.expected}, joined {sorted(taken)})"
            )
            self.log.error(
                "utils.py:846",
                f"Rejected engine handshake from {hello.get('node', '?')}: {reason}",
            )
            self._send(writer, {"type": "reject", "reason": reason})
            writer.close()
            return
        peer = Peer(
            ranks,
            str(hello.get("node", "")),
            str(hello.get("link_mode", "hccs")),
            float(hello.get("hccs_loss_pct", 0.0)),
            writer,
            garbled=bool(hello.get("garbled", False)),
        )
        self.peers.append(peer)
        self._send(writer, {"type": "init"})
        self._handshake("HELLO", ranks)
        self.on_peer_change(peer)
        async for msg in read_messages(reader):
            if msg.get("type") == "ready":
                peer.loaded = True
                self._handshake("READY", ranks)
            elif msg.get("type") == "hb":
                peer.link_mode = str(msg.get("link_mode", peer.link_mode))
                peer.loss_pct = float(msg.get("hccs_loss_pct", peer.loss_pct))
                peer.garbled = bool(msg.get("garbled", peer.garbled))
            self.on_peer_change(peer)
        self.peers.remove(peer)
        if not self.closing:
            self.on_dead(
                f"Engine core proc EngineCore_DP{ranks[0]} on "
                f"{peer.node or 'remote node'} "
                "died unexpectedly, shutting down client."
            )


class HandshakeTimeout(Exception):
    """No head answered within the handshake timeout."""


async def headless_connect(
    host: str, port: int, hello: dict[str, Any], timeout_s: float
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, dict[str, Any]]:
    """Connect to the head (retrying until ``timeout_s``), say HELLO, await the reply.

    Returns reader, writer and the reply ("init" or "reject"); raises HandshakeTimeout.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        remaining = deadline - loop.time()
        if remaining <= 0:
            raise HandshakeTimeout()
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port), remaining
            )
        except (TimeoutError, OSError):
            await asyncio.sleep(min(0.2, max(deadline - loop.time(), 0)))
            continue
        writer.write(_encode(hello))
        try:
            line = await asyncio.wait_for(
                reader.readline(), max(deadline - loop.time(), 0.01)
            )
        except (TimeoutError, OSError):
            writer.close()
            continue
        if not line:
            writer.close()
            await asyncio.sleep(0.2)
            continue
        return reader, writer, json.loads(line)


def encode(msg: dict[str, Any]) -> bytes:
    """One protocol line."""
    return _encode(msg)
