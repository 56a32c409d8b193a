#!/usr/bin/env bash
# install — set up (or upgrade) the Ascend vLLM Ops Console or a node agent from this
# offline bundle. Nothing is fetched: pip runs with --no-index --find-links wheels/<tag>.
#
#   ./install console [options]              console host: web, control worker, beat
#   ./install agent --node NAME [options]    one Ascend server's agent
#   ./install agent-order [options]          console host: the agents' upgrade order;
#                                            refuses (exit 3) while an operation runs
#
# Options: --prefix DIR (/opt/ascend-console)  --etc DIR (/etc/ascend-console)
#          --var DIR (/var/lib/ascend-console)  --systemd-dir DIR (/etc/systemd/system)
#          --user NAME (ascend-console; created as a system user when missing)
#          --python PATH (python3, 3.11+)  --no-systemd (write units, call no systemctl)
#          --yes (agent: restart a running agent without asking)
#
# What it does, every run (idempotent): unpacks this release into PREFIX/releases/<ver>/
# (app + its own venv) unless already complete; creates the service user, directories,
# console.env / agent.env from the examples, secret_key and metrics_token only when
# missing (never overwrites site settings); console: refuses while an operation runs,
# then migrate + collectstatic with the new release; switches PREFIX/app and PREFIX/venv
# to it (the previous release stays for rollback: point the links back); writes the
# systemd units and restarts the services. Upgrading agents: run `agent-order` on the
# console host, then on each node in that order, one at a time, `./install agent`, and
# wait for the node to show as online in the console before the next one.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VERSION="$(cat "$HERE/VERSION")"
PREFIX=/opt/ascend-console ETC=/etc/ascend-console VAR=/var/lib/ascend-console
UNITS=/etc/systemd/system SERVICE_USER=ascend-console PYTHON=python3
SYSTEMD=1 YES=0 NODE=""

die() { echo "install: $*" >&2; exit 1; }
say() { echo "install: $*"; }

ROLE="${1:-}"; shift || true
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) PREFIX="$2"; shift 2 ;;
    --etc) ETC="$2"; shift 2 ;;
    --var) VAR="$2"; shift 2 ;;
    --systemd-dir) UNITS="$2"; shift 2 ;;
    --user) SERVICE_USER="$2"; shift 2 ;;
    --python) PYTHON="$2"; shift 2 ;;
    --node) NODE="$2"; shift 2 ;;
    --no-systemd) SYSTEMD=0; shift ;;
    --yes) YES=1; shift ;;
    *) die "unknown option $1 (see the header of this script)" ;;
  esac
done
case "$ROLE" in
  console|agent|agent-order) ;;
  *) die "usage: ./install console|agent --node NAME|agent-order [options]" ;;
esac

# Which wheels: this interpreter's version and this machine's architecture.
command -v "$PYTHON" >/dev/null || die "$PYTHON not found; pass --python /path/to/python3.11"
PYVER="$("$PYTHON" -c 'import sys; print(f"{sys.version_info.major}{sys.version_info.minor}")')"
[ "$PYVER" -ge 311 ] || die "Python 3.11+ is required ($PYTHON is ${PYVER:0:1}.${PYVER:1})"
TAG="py${PYVER}-$(uname -m)"
WHEELS="$HERE/wheels/$TAG"
[ -d "$WHEELS" ] || die "this bundle has no wheels for $TAG (it has: $(ls "$HERE/wheels" | tr '\n' ' '))"

RELEASE="$PREFIX/releases/$VERSION"

# As the service user when we are root (files under VAR stay theirs), else as ourselves.
as_user() {
  if [ "$(id -u)" = 0 ] && [ "$SERVICE_USER" != root ]; then runuser -u "$SERVICE_USER" -- "$@"; else "$@"; fi
}

# Run manage.py of a release with console.env loaded (systemd's EnvironmentFile format
# is KEY=VALUE lines, which the shell reads the same way).
manage() {
  local release="$1"; shift
  (set -a; . "$ETC/console.env"; set +a; cd "$release/app" && as_user "$release/venv/bin/python" manage.py "$@")
}

unpack_release() {
  local role="$1"
  if [ -f "$RELEASE/.complete-$role" ]; then
    say "release $VERSION ($role) already unpacked in $RELEASE"
    return
  fi
  mkdir -p "$RELEASE"
  if [ ! -d "$RELEASE/app" ]; then
    cp -a "$HERE/app" "$RELEASE/app.tmp" && mv "$RELEASE/app.tmp" "$RELEASE/app"
  fi
  [ -x "$RELEASE/venv/bin/python" ] || "$PYTHON" -m venv "$RELEASE/venv"
  say "installing the $role wheels ($TAG) with no network"
  # --isolated and no config file: the site's pip settings (mirrors, constraints) play no part
  PIP_CONFIG_FILE=/dev/null "$RELEASE/venv/bin/python" -m pip install --isolated --quiet \
    --no-index --find-links "$WHEELS" \
    --disable-pip-version-check -r "$HERE/requirements/$role.txt" -c "$HERE/requirements/constraints.txt"
  # The application is imported from app/ (the units' WorkingDirectory), and by tools
  # run from anywhere through this path file.
  local site; site="$("$RELEASE/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  echo "$RELEASE/app" > "$site/ascend-console.pth"
  touch "$RELEASE/.complete-$role"
}

ensure_user() {
  if [ "$SERVICE_USER" = root ] || id -u "$SERVICE_USER" >/dev/null 2>&1; then return 0; fi
  [ "$(id -u)" = 0 ] || die "user $SERVICE_USER is missing and only root can create it"
  useradd --system --home-dir "$VAR" --shell /usr/sbin/nologin "$SERVICE_USER"
  say "created system user $SERVICE_USER"
}

# A secret file made once: 0640, readable by the service user's group.
ensure_secret() {
  local file="$1"
  if [ -s "$file" ]; then return 0; fi
  (umask 027; "$PYTHON" -c 'import secrets; print(secrets.token_urlsafe(50))' > "$file")
  if [ "$(id -u)" = 0 ] && [ "$SERVICE_USER" != root ]; then chgrp "$SERVICE_USER" "$file"; fi
  say "generated $file"
}

# deploy/systemd/<unit> with this install's paths, into the unit directory.
write_unit() {
  local unit="$1"
  sed -e "s#/opt/ascend-console#$PREFIX#g" -e "s#/etc/ascend-console#$ETC#g" \
      -e "s#^User=ascend-console#User=$SERVICE_USER#" -e "s#^Group=ascend-console#Group=$SERVICE_USER#" \
      "$RELEASE/app/deploy/systemd/$unit" > "$UNITS/$unit.tmp"
  mv "$UNITS/$unit.tmp" "$UNITS/$unit"
}

switch_links() {
  for link in app venv; do
    ln -sfn "$RELEASE/$link" "$PREFIX/$link.new" && mv -T "$PREFIX/$link.new" "$PREFIX/$link"
  done
  say "$PREFIX/app and $PREFIX/venv now point at $VERSION"
}

# The operations that are not finished; prints one per line (for the gate).
running_operations() {
  manage "$1" shell -v 0 -c '
from console.models import Operation
for op in Operation.objects.filter(finished_at=None).select_related("cluster"):
    print(f"{op.cluster.name}: {op.kind} #{op.pk} ({op.state})")'
}

gate_operations() {
  local running; running="$(running_operations "$1")"
  if [ -n "$running" ]; then
    echo "$running" >&2
    echo "install: an operation is running; wait for it to finish (or cancel it in the console) and run this again" >&2
    exit 3
  fi
}

install_console() {
  ensure_user
  unpack_release console
  mkdir -p "$ETC" "$VAR" "$VAR/static" "$UNITS"
  if [ ! -f "$ETC/console.env" ]; then
    sed -e "s#/etc/ascend-console#$ETC#g" -e "s#/var/lib/ascend-console#$VAR#g" \
      "$RELEASE/app/deploy/console.env.example" > "$ETC/console.env"
    chmod 640 "$ETC/console.env"
    say "wrote $ETC/console.env from the example: set DATABASE_URL, REDIS_URL, ALLOWED_HOSTS, then run this again"
    exit 2
  fi
  ensure_secret "$ETC/secret_key"
  ensure_secret "$ETC/metrics_token"
  if [ "$(id -u)" = 0 ] && [ "$SERVICE_USER" != root ]; then chown -R "$SERVICE_USER:" "$VAR"; fi
  # Upgrade path: no migration under a running operation (its worker would be restarted).
  if [ -e "$PREFIX/app" ] && [ "$(readlink -f "$PREFIX/app")" != "$(readlink -f "$RELEASE/app")" ]; then
    gate_operations "$(dirname "$(readlink -f "$PREFIX/app")")"
  fi
  say "migrating the database"
  manage "$RELEASE" migrate --noinput
  manage "$RELEASE" collectstatic --noinput -v 0
  switch_links
  for unit in ascend-console-web.service ascend-console-control.service ascend-console-beat.service; do
    write_unit "$unit"
  done
  if [ "$SYSTEMD" = 1 ]; then
    systemctl daemon-reload
    systemctl enable ascend-console-web ascend-console-control ascend-console-beat
    systemctl restart ascend-console-web ascend-console-control ascend-console-beat
    say "services (re)started"
  fi
  say "console $VERSION installed. First admin: cd $PREFIX/app && (set -a; . $ETC/console.env; $PREFIX/venv/bin/python manage.py createsuperuser)"
}

install_agent() {
  [ -n "$NODE" ] || die "agent: pass --node NAME (the node's name in the console's inventory)"
  case "$NODE" in *[!A-Za-z0-9._-]*) die "agent: --node may hold letters, digits, . _ - only" ;; esac
  unpack_release agent
  mkdir -p "$ETC" "$UNITS" "/var/lib/ascend-agent/$NODE"
  if [ ! -f "$ETC/agent.env" ]; then
    sed -e "s#^NODE_NAME=.*#NODE_NAME=$NODE#" -e "s#ascend-01#$NODE#g" \
      "$RELEASE/app/deploy/agent.env.example" > "$ETC/agent.env"
    chmod 600 "$ETC/agent.env"
    say "wrote $ETC/agent.env: set CELERY_BROKER_URL and CELERY_RESULT_BACKEND, then run this again"
    exit 2
  fi
  local active=0
  if [ "$SYSTEMD" = 1 ] && systemctl is-active --quiet ascend-agent; then active=1; fi
  if [ "$active" = 1 ] && [ "$YES" = 0 ]; then
    read -r -p "install: restart the running agent on $NODE now (did agent-order on the console host pass)? [y/N] " answer
    [ "$answer" = y ] || die "not restarted; nothing changed on this node"
  fi
  switch_links
  write_unit ascend-agent.service
  if [ "$SYSTEMD" = 1 ]; then
    systemctl daemon-reload
    systemctl enable ascend-agent
    systemctl restart ascend-agent
    say "agent restarted; wait until $NODE shows online in the console before the next node"
  fi
}

agent_order() {
  local current; current="$(dirname "$(readlink -f "$PREFIX/app")")"
  [ -x "$current/venv/bin/python" ] || die "no console installed under $PREFIX"
  gate_operations "$current"
  manage "$current" shell -v 0 -c '
from console.models import Cluster, Node
n = 0
for cluster in Cluster.objects.order_by("name"):
    for node in cluster.ranked_nodes():
        n += 1
        print(f"{n}. {node.name}  ({cluster.name} rank {node.rank}, {node.management_ip})")
for node in Node.objects.filter(cluster=None).order_by("name"):
    n += 1
    print(f"{n}. {node.name}  (no cluster, {node.management_ip})")'
  say "no operation is running: upgrade the nodes above one at a time, in this order"
}

case "$ROLE" in
  console) install_console ;;
  agent) install_agent ;;
  agent-order) agent_order ;;
esac
