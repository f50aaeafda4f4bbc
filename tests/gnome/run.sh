#!/usr/bin/env bash
# Entry point for the real-GNOME portal test (run by scripts/test-all.sh): installs what it needs (Debian 12,
# as root, like scripts/test-all.sh), builds the koru binary, runs tests/gnome/e2e.py.
#   tests/gnome/run.sh [e2e.py options]      e.g. --dir /tmp/gnome-e2e --keep
set -euo pipefail
cd "$(dirname "$0")/../.."

packages=(gnome-shell mutter xdg-desktop-portal xdg-desktop-portal-gnome python3-dbus python3-gi
  gir1.2-glib-2.0 gir1.2-gtk-4.0 at-spi2-core gir1.2-atspi-2.0 python3-pyatspi
  gsettings-desktop-schemas dbus-daemon dbus-bin foot)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "installing: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "missing system packages: ${missing[*]} (install them with apt-get, or run this script as root)" >&2
    exit 1
  fi
fi

nice cargo build --bin koru --locked
# Debian's python3-gi / python3-pyatspi / python3-dbus live in the system python only.
exec /usr/bin/python3 tests/gnome/e2e.py --koru target/debug/koru "$@"
