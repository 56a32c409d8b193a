"""deploy/nginx passes `nginx -t` with Debian 12's nginx (1.22: no standalone `http2` directive)."""

from __future__ import annotations

from pathlib import Path

from tests.deploy.render import render_nginx
from tests.deploy.tools import need, run


def test_it_passes_nginx_t_on_the_distribution_nginx(tmp_path: Path) -> None:
    main = render_nginx(tmp_path)
    result = run([need("nginx"), "-t", "-c", str(main), "-e", str(tmp_path / "e.log")])
    assert result.returncode == 0, result.stderr
    assert "syntax is ok" in result.stderr and "[emerg]" not in result.stderr
    assert "[warn]" not in result.stderr, result.stderr
