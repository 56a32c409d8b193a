"""Redis ACL users for the broker: the console with full access, each agent confined to its node.

An agent may only touch its own queue ``node.<name>`` (and kombu's priority sub-queues
``node.<name>\\x06\\x16<n>``), its queue's bindings, its own unacked keys (engine/agent/boundary.py
sets them per node) and Celery result keys ``celery-task-meta-*`` (it must GET before
SET: Celery's key-value backend reads the stored state first). It cannot list keys
(KEYS, SCAN, RANDOMKEY are refused), so other nodes' task ids — random uuid4s that only
travel in their own queue — stay unknown to it. It cannot publish to another node's
queue, read it, or run dangerous commands (CONFIG, FLUSHALL, DEBUG, …).

Redis ACL syntax: https://redis.io/docs/latest/operate/oss_and_stack/management/security/acl/
(Redis 7: ``~pattern`` keys, ``&pattern`` channels, ``#<sha256>`` password hashes,
``[^...]`` in glob patterns). Passwords are derived per node from SECRET_KEY, so nothing
new is stored: ``manage.py broker_acl`` prints the ACL file and each agent's broker URL.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from urllib.parse import quote

from django.conf import settings

CONSOLE_USER = "console"
# a node name as console.models validates it: no glob metacharacter can reach a pattern
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}\Z")
# commands an agent needs (Celery worker + Redis result backend), by category; the key
# and channel patterns then decide *which* keys. Keyless listing commands are removed.
AGENT_COMMANDS = (
    "-@all +@connection +@read +@write +@transaction +@pubsub +@scripting "
    "-@dangerous -scan -keys -randomkey"
)


def _secret(purpose: str, name: str) -> str:
    mac = hmac.new(
        settings.SECRET_KEY.encode(),
        f"ascend-console broker {purpose}\x00{name}".encode(),
        hashlib.sha256,
    ).hexdigest()
    return mac[:48]


def agent_user(node: str) -> str:
    return f"agent-{node}"


def agent_password(node: str) -> str:
    """The broker password of ``node``'s agent (derived; rotate SECRET_KEY to rotate all)."""
    return _secret("agent", node)


def console_password() -> str:
    return _secret("console", CONSOLE_USER)


def _check(node: str) -> str:
    if not _NAME.match(node):
        raise ValueError(
            f"{node!r} is not a node name; it cannot go into an ACL pattern"
        )
    return node


def agent_acl_rule(node: str, password: str) -> str:
    """One ``user`` line of a Redis ACL file for ``node``'s agent."""
    q = f"node.{_check(node)}"
    keys = [
        q,
        f"{q}[^-A-Za-z0-9._]*",  # kombu's priority queues: q + "\x06\x16" + step
        f"_kombu.binding.{q}",
        f"_kombu.binding_permanent.{q}",
        f"unacked:{q}",
        f"unacked_index:{q}",
        f"unacked_mutex:{q}",
        "celery-task-meta-*",
    ]
    digest = hashlib.sha256(password.encode()).hexdigest()
    return (
        f"user {agent_user(node)} on #{digest} resetkeys resetchannels {AGENT_COMMANDS} "
        + " ".join(f"~{k}" for k in keys)
        + " &celery-task-meta-*"
    )


def console_acl_rule(password: str) -> str:
    """The console (web, control worker, beat, Channels layer): every key and channel."""
    digest = hashlib.sha256(password.encode()).hexdigest()
    return f"user {CONSOLE_USER} on #{digest} ~* &* +@all"


def acl_file(nodes: list[str]) -> str:
    """A Redis ACL file: no default user, the console, one confined user per agent."""
    # (an ACL file takes no comments: every line is a "user" directive)
    lines = [
        "user default off",
        console_acl_rule(console_password()),
    ]
    lines += [agent_acl_rule(node, agent_password(node)) for node in nodes]
    return "\n".join(lines) + "\n"


def agent_broker_url(
    node: str, host: str, port: int = 6379, db: int = 0, tls: bool = False
) -> str:
    scheme = "rediss" if tls else "redis"
    return f"{scheme}://{quote(agent_user(node))}:{quote(agent_password(node))}@{host}:{port}/{db}"
