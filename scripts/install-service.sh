#!/usr/bin/env bash
# Installs corral as a systemd service (run as root, after ./scripts/install.sh has built it):
# corrald.service (the daemon), corrald-instances.service (stops the instances in boot.stop.priority
# order at host shutdown) and a logrotate rule for its log file, with this checkout's paths filled in.
# Then reloads systemd and enables and starts both units, when systemd runs this machine.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=$(pwd)

usage() {
  cat <<USAGE
Usage: scripts/install-service.sh [--dir <data dir>] [--unit-dir <dir>] [--logrotate-dir <dir>] [--no-enable] [-- <corrald flags>]
  --dir            the daemon's data directory (default: /var/lib/corral)
  --unit-dir       where the units go (default: /etc/systemd/system)
  --logrotate-dir  where the logrotate rule goes (default: /etc/logrotate.d)
  --no-enable      write the files only: no daemon-reload, enable or start
  -- <flags>       more flags for the daemon (for example: -- --plugins edge --log-level debug)
USAGE
}

dir=/var/lib/corral
unit_dir=/etc/systemd/system
logrotate_dir=/etc/logrotate.d
enable=1
daemon_flags=''
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir=${2:?--dir needs a value}; shift 2 ;;
    --unit-dir) unit_dir=${2:?--unit-dir needs a value}; shift 2 ;;
    --logrotate-dir) logrotate_dir=${2:?--logrotate-dir needs a value}; shift 2 ;;
    --no-enable) enable=0; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; for f in "$@"; do daemon_flags+=" $(printf '%q' "$f")"; done; break ;;
    *) echo "install-service.sh: unknown argument \"$1\"" >&2; usage >&2; exit 2 ;;
  esac
done
case "$dir" in /*) ;; *) dir="$(pwd)/$dir" ;; esac

node=$(command -v node || true)
if [ -z "$node" ]; then
  echo "install-service.sh: node is not on PATH (corral needs Node.js 20 or newer; see the README)" >&2
  exit 1
fi
if [ ! -f "$prefix/dist/bin/corrald.js" ] || [ ! -f "$prefix/dist/bundle/corrald-full.cjs" ]; then
  echo "install-service.sh: corral is not built here; run ./scripts/install.sh first" >&2
  exit 1
fi
node_flags=$("$node" -p "require('./package.json').config?.nodeFlags ?? ''")
malloc_env=$("$node" -p "require('./package.json').config?.mallocEnv ?? ''")

# Paths go into the units as they are: systemd would split one with a space in it.
for p in "$prefix" "$dir" "$node"; do
  case "$p" in *[[:space:]]*) echo "install-service.sh: \"$p\" has a space in it, which a unit file cannot take" >&2; exit 1 ;; esac
done

fill() {
  sed -e "s|@PREFIX@|$prefix|g" -e "s|@NODE@|$node|g" -e "s|@NODE_FLAGS@|$node_flags|g" -e "s|@MALLOC_ENV@|$malloc_env|g" \
      -e "s|@DIR@|$dir|g" -e "s|@DAEMON_FLAGS@|$daemon_flags|g" "$1"
}

mkdir -p "$unit_dir" "$logrotate_dir"
fill contrib/systemd/corrald.service > "$unit_dir/corrald.service"
fill contrib/systemd/corrald-instances.service > "$unit_dir/corrald-instances.service"
fill contrib/logrotate/corrald > "$logrotate_dir/corrald"
chmod 0644 "$unit_dir/corrald.service" "$unit_dir/corrald-instances.service" "$logrotate_dir/corrald"
echo "wrote $unit_dir/corrald.service, $unit_dir/corrald-instances.service and $logrotate_dir/corrald"

if [ "$enable" = 0 ]; then exit 0; fi
if [ ! -d /run/systemd/system ]; then
  echo "systemd is not running this machine: the units are written but not enabled (start the daemon with npm start instead)" >&2
  exit 0
fi
systemctl daemon-reload
systemctl enable --now corrald.service corrald-instances.service
echo "corrald is running: systemctl status corrald; logs: journalctl -u corrald or $dir/corral.log"
