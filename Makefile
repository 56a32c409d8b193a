# The README's two commands are `make run` and `make test`; both call `make setup`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: help setup run test test-fast e2e-deps deploy-tools bundle lint typecheck messages clean

help:  ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

setup: $(STAMP) messages vendor  ## create .venv, install pinned deps, compile translations, fetch front-end libraries

$(STAMP): pyproject.toml requirements.lock
	@$(PY) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || { echo "make setup: Python 3.11+ is required (found $$($(PY) --version)); set PY=/path/to/python3.11"; exit 1; }
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c requirements.lock -e '.[dev]'
	@touch $(STAMP)

messages: $(STAMP)  ## compile the zh-Hans / en catalogues (needs GNU gettext's msgfmt)
	@command -v msgfmt >/dev/null || { echo "make setup: msgfmt not found; install GNU gettext (Debian: apt-get install gettext)"; exit 1; }
	@$(BIN)/python manage.py compilemessages --ignore '.venv' --ignore 'node_modules' -v 0

vendor: $(STAMP)  ## third-party front-end files from the npm registry (package-lock.json) into static/vendor/
	@$(BIN)/python -m console.vendor

run: setup  ## migrate, seed the demo, start every process under honcho (Ctrl-C stops all)
	$(BIN)/python manage.py bootstrap_demo
	@exec $(BIN)/python -m console.launch

# Most of the suite waits (on engines, workers, a browser), so two processes side by side
# take about half the time even on two cores (tests/services.py: each gets its own Redis
# and database). A test file stays on one process (--dist loadfile: module fixtures).
PYTEST_WORKERS ?= 2

test: setup e2e-deps deploy-tools  ## the whole test suite (embedded Redis, SQLite unless DATABASE_URL is set; PYTEST_WORKERS=1 for one process)
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

test-fast: setup  ## unit tests only (no browser, no worker processes)
	$(BIN)/python -m pytest -m "not e2e and not integration" $(PYTEST_ARGS)

e2e-deps:  ## Debian's chromium for the browser tests (installed when running as root with apt)
	@command -v chromium >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    (apt-get install -y -q chromium >/dev/null 2>&1 || (apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null)) ; \
	  else echo "make test: browser tests need Debian's chromium: sudo apt-get install chromium"; exit 1; fi; }
	@# A CJK font, so zh-Hans screenshots (tests/artifacts/screenshots/) show characters, not boxes.
	@fc-list :lang=zh 2>/dev/null | grep -q . || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then apt-get install -y -q fonts-wqy-microhei >/dev/null 2>&1 || true; \
	  else echo "make test: zh-Hans screenshots need a CJK font: sudo apt-get install fonts-wqy-microhei"; fi; }

# tool → Debian 12 package: nginx → nginx, promtool → prometheus,
# amtool + prometheus-alertmanager → prometheus-alertmanager, systemd-analyze → systemd.
DEPLOY_TOOLS := nginx promtool amtool prometheus-alertmanager systemd-analyze openssl
DEPLOY_PKGS := nginx prometheus prometheus-alertmanager systemd openssl
deploy-tools:  ## the deploy/ files' own tools for tests/deploy (Debian packages, installed when running as root with apt)
	@missing=; for t in $(DEPLOY_TOOLS); do command -v $$t >/dev/null || [ -x /usr/sbin/$$t ] || missing="$$missing $$t"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    export DEBIAN_FRONTEND=noninteractive; \
	    (apt-get install -y -q --no-install-recommends $(DEPLOY_PKGS) >/dev/null 2>&1 || (apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends $(DEPLOY_PKGS) >/dev/null)) ; \
	  else echo "make test: tests/deploy need$$missing: sudo apt-get install $(DEPLOY_PKGS)"; exit 1; fi; fi

# BUNDLE_PLATFORMS=host builds this machine's wheels only (what tests/deploy/test_bundle.py does).
BUNDLE_PLATFORMS ?= all
BUNDLE_OUT ?= dist
bundle: setup  ## offline install bundle: dist/ascend-console-<version>.tar.gz + .sha256 (console + agent wheels for x86_64/aarch64, py3.11/3.12)
	$(BIN)/python deploy/bundle.py --platforms $(BUNDLE_PLATFORMS) --out $(BUNDLE_OUT)

lint:  ## ruff lint + format check
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

typecheck:  ## mypy (engine/ strict)
	$(BIN)/mypy engine console monitoring

clean:  ## remove var/ (database, bundled Redis data, credentials)
	rm -rf var
