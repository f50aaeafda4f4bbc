#!/usr/bin/env bash
# Test only: a real GNOME Shell session, headless, with the real desktop portal
# (xdg-desktop-portal + xdg-desktop-portal-gnome), in a private directory.
#
#   tests/gnome/session.sh start DIR   # prints `export …` lines; also written to DIR/env
#   tests/gnome/session.sh stop DIR    # ends every process it started (by pid), keeps DIR
#
# Recipe: /work/shared/RECIPES.md, "A real GNOME session with the real desktop portal,
# headless". Needs Debian 12 packages: see tests/gnome/README.md.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cmd="${1:-}"
dir="${2:-}"
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop|env DIR" >&2; exit 2; }
dir="$(realpath -m "$dir")"

now_ms() { date +%s%3N; }
log() { echo "session.sh: $*" >&2; }

stop() {
  [ -f "$dir/pids" ] || return 0
  # Newest first: the keyboard holder, gnome-shell, then the buses (the portals die with
  # the session bus; they are D-Bus-activated children of it).
  local pids
  pids="$(tac "$dir/pids")"
  for pid in $pids; do kill "$pid" 2>/dev/null || true; done
  for _ in $(seq 50); do
    local alive=0
    for pid in $pids; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.1
  done
  for pid in $pids; do kill -9 "$pid" 2>/dev/null || true; done
  rm -f "$dir/pids"
  # Processes the session bus activated (portals, dconf, at-spi) can outlive it: end, by
  # pid, those the bus started (DBUS_STARTER_ADDRESS names this session's bus).
  local runtime="$dir/run" left=""
  for env in /proc/[0-9]*/environ; do
    local pid="${env#/proc/}"; pid="${pid%/environ}"
    [ "$pid" = $$ ] && continue
    if { tr '\0' '\n' <"$env"; } 2>/dev/null | grep -qx "DBUS_STARTER_ADDRESS=unix:path=$runtime/bus"; then left="$left $pid"; fi
  done
  if [ -n "$left" ]; then
    log "ending leftover processes of the session:$left"
    kill $left 2>/dev/null || true
    sleep 0.5
    kill -9 $left 2>/dev/null || true
  fi
}

case "$cmd" in
  stop) stop; exit 0 ;;
  env) cat "$dir/env"; exit 0 ;;
  start) ;;
  *) echo "usage: $0 start|stop|env DIR" >&2; exit 2 ;;
esac

t0=$(now_ms)
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
[ ! -f "$dir/pids" ] || { log "a session already runs in $dir (stop it first)"; exit 1; }
runtime="$dir/run"
mkdir -p "$runtime" "$dir/home" "$dir/config/pulse" "$dir/data" "$dir/cache" "$dir/state"
chmod 0700 "$runtime" "$dir"
echo "autospawn = no" >"$dir/config/pulse/client.conf"
display="wayland-koru-$$"

cat >"$dir/env" <<EOF
export XDG_RUNTIME_DIR=$runtime
export HOME=$dir/home
export XDG_CONFIG_HOME=$dir/config
export XDG_DATA_HOME=$dir/data
export XDG_CACHE_HOME=$dir/cache
export XDG_STATE_HOME=$dir/state
export XDG_CURRENT_DESKTOP=GNOME
export XDG_SESSION_TYPE=wayland
export XDG_SESSION_DESKTOP=gnome
export DBUS_SESSION_BUS_ADDRESS=unix:path=$runtime/bus
export DBUS_SYSTEM_BUS_ADDRESS=unix:path=$runtime/system_bus
export WAYLAND_DISPLAY=$display
export GDK_BACKEND=wayland
export GTK_A11Y=atspi
export LANG=C.UTF-8
export LANGUAGE=C
unset DISPLAY SWAYSOCK
EOF
# shellcheck disable=SC1091
. "$dir/env"
: >"$dir/pids"

# The session bus, and a second, empty bus standing in for the system bus (without one
# gnome-shell dies at start: JS ERROR … LoginManagerSystemd).
dbus-daemon --session --address="$DBUS_SESSION_BUS_ADDRESS" --fork --print-pid >>"$dir/pids"
dbus-daemon --session --address="$DBUS_SYSTEM_BUS_ADDRESS" --fork --print-pid >>"$dir/pids"
# The activation environment before anything is activated (the portal backend needs
# WAYLAND_DISPLAY, or the portal offers no RemoteDesktop).
dbus-update-activation-environment WAYLAND_DISPLAY XDG_CURRENT_DESKTOP XDG_SESSION_TYPE \
  XDG_SESSION_DESKTOP XDG_RUNTIME_DIR HOME XDG_CONFIG_HOME XDG_DATA_HOME XDG_CACHE_HOME \
  XDG_STATE_HOME DBUS_SYSTEM_BUS_ADDRESS GDK_BACKEND GTK_A11Y LANG LANGUAGE

# No hot corner: a test's pointer moved through the top-left corner would open the Overview.
gsettings set org.gnome.desktop.interface enable-hot-corners false

gnome-shell --headless --wayland --no-x11 --virtual-monitor 1280x800 \
  --wayland-display "$display" >"$dir/gnome-shell.log" 2>&1 &
echo $! >>"$dir/pids"
shell_pid=$!

# Up when the Wayland socket exists and org.gnome.Shell answers.
ok=0
for _ in $(seq 300); do
  kill -0 "$shell_pid" 2>/dev/null || { log "gnome-shell died: see $dir/gnome-shell.log"; tail -20 "$dir/gnome-shell.log" >&2; stop; exit 1; }
  if [ -S "$runtime/$display" ] && gdbus call --session --dest org.gnome.Shell \
      --object-path /org/gnome/Shell --method org.freedesktop.DBus.Properties.Get \
      org.gnome.Shell OverviewActive >/dev/null 2>&1; then ok=1; break; fi
  sleep 0.1
done
[ $ok = 1 ] || { log "gnome-shell did not come up in 30 s"; stop; exit 1; }
t_shell=$(now_ms)

# It shows the Overview when its startup completes ("GNOME Shell started at" in its log), or
# keys would go to the Overview's search box: hide it after that, and until it stays hidden.
for _ in $(seq 300); do grep -q "GNOME Shell started at" "$dir/gnome-shell.log" && break; sleep 0.1; done
overview() {
  gdbus call --session --dest org.gnome.Shell --object-path /org/gnome/Shell \
    --method org.freedesktop.DBus.Properties.Get org.gnome.Shell OverviewActive
}
stable=0
for _ in $(seq 100); do
  if [ "$(overview)" = "(<false>,)" ]; then
    stable=$((stable + 1)); [ $stable -ge 3 ] && break
  else
    stable=0
    gdbus call --session --dest org.gnome.Shell --object-path /org/gnome/Shell \
      --method org.freedesktop.DBus.Properties.Set org.gnome.Shell OverviewActive "<false>" >/dev/null
  fi
  sleep 0.1
done
[ $stable -ge 3 ] || { log "the Overview would not stay hidden"; stop; exit 1; }

# One remote-desktop session for the session's life so the seat has a keyboard.
/usr/bin/python3 "$here/keyboard_holder.py" >"$dir/keyboard_holder.out" 2>&1 &
echo $! >>"$dir/pids"
for _ in $(seq 200); do grep -q ready "$dir/keyboard_holder.out" 2>/dev/null && break; sleep 0.1; done
grep -q ready "$dir/keyboard_holder.out" || { log "keyboard holder failed: $(cat "$dir/keyboard_holder.out")"; stop; exit 1; }
t_end=$(now_ms)
echo "# session up: gnome-shell answering after $((t_shell - t0)) ms, ready (overview off, keyboard) after $((t_end - t0)) ms" >>"$dir/env"
cat "$dir/env"
log "up in $((t_end - t0)) ms (gnome-shell $((t_shell - t0)) ms); stop with: $0 stop $dir"
