"""A real HTTP server on a free local port standing in for a chat robot's endpoint: it
records each request and answers what the vendor answers (``reply`` picks the answer)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Received:
    path: str
    query: dict[str, str]
    raw_query: str
    headers: dict[str, str]
    body: Any


@dataclass
class Receiver:
    url: str
    requests: list[Received] = field(default_factory=list)


Reply = Callable[[Received], tuple[int, dict[str, Any]]]


@contextmanager
def receiver(reply: Reply) -> Iterator[Receiver]:
    """Serve on 127.0.0.1:<free port> until the block ends."""
    state = Receiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            length = int(self.headers.get("Content-Length", 0))
            raw = self.rfile.read(length)
            parts = urlsplit(self.path)
            got = Received(
                path=parts.path,
                query={k: v[0] for k, v in parse_qs(parts.query).items()},
                raw_query=parts.query,
                headers={k.lower(): v for k, v in self.headers.items()},
                body=json.loads(raw),
            )
            state.requests.append(got)
            status, answer = reply(got)
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
