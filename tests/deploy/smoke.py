"""Smoke test of a running console, run with the *installed* venv's Python (needs only httpx):

    python smoke.py BASE_URL USER PASSWORD METRICS_TOKEN STATIC_PATH

Health, the login page, a front-end file, logging in and the dashboard, /metrics with
its token. Prints one line per check; exits non-zero on the first failure.
"""

from __future__ import annotations

import re
import sys
import time

import httpx


def check(label: str, ok: bool, detail: object = "") -> None:
    print(
        f"smoke: {'ok  ' if ok else 'FAIL'} {label} {detail if not ok else ''}".rstrip()
    )
    if not ok:
        sys.exit(1)


def main() -> None:
    base, user, password, token, static = sys.argv[1:6]
    client = httpx.Client(base_url=base, verify=False, timeout=10)  # noqa: S501 - self-signed in tests
    deadline = time.monotonic() + 60
    while True:
        try:
            health = client.get("/healthz")
            if health.status_code == 200:
                break
        except httpx.HTTPError as exc:
            health = exc  # type: ignore[assignment]
        if time.monotonic() > deadline:
            check("healthz answers 200", False, health)
        time.sleep(0.5)
    check(
        "healthz: database and redis up", health.json()["status"] == "ok", health.text
    )
    page = client.get("/accounts/login/")
    check("login page", page.status_code == 200, page.status_code)
    asset = client.get(static)
    check(
        f"static file {static}",
        asset.status_code == 200 and len(asset.content) > 100,
        asset.status_code,
    )
    match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    check("login form has a CSRF token", match is not None)
    assert match is not None
    login = client.post(
        "/accounts/login/",
        data={
            "username": user,
            "password": password,
            "csrfmiddlewaretoken": match.group(1),
        },
        headers={"Referer": f"{base}/accounts/login/"},
    )
    check(
        "login redirects",
        login.status_code == 302,
        f"{login.status_code} {login.text[:300]}",
    )
    home = client.get("/")
    check(
        "dashboard after login",
        home.status_code == 200 and user in home.text,
        home.status_code,
    )
    metrics = client.get("/metrics", headers={"Authorization": f"Bearer {token}"})
    check(
        "metrics with the token",
        metrics.status_code == 200 and "console_nodes" in metrics.text,
        metrics.status_code,
    )
    check(
        "metrics refused without it", client.get("/metrics").status_code in (401, 403)
    )
    print("smoke: passed")


if __name__ == "__main__":
    main()
