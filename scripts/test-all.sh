#!/usr/bin/env bash
# Runs every test of the project on a fresh machine: installs the system tools the tests drive for real (Xvfb, xterm, tmux, kitty, xdotool, xclip, sway, foot, wtype, wl-clipboard, dbus, OpenSSH client and server), then the real terminal agents from npm (tests/agents), the Rust workspace tests, the VS Code extension's tests, the dashboard's browser tests, the JetBrains plugin's build and tests, and the desktop portal on a real headless GNOME session.
set -euo pipefail
cd "$(dirname "$0")/.."

# program → Debian package providing it
declare -A needed=(
  [setpriv]=util-linux
  [Xvfb]=xvfb
  [xdpyinfo]=x11-utils
  [xdotool]=xdotool
  [wtype]=wtype
  [xclip]=xclip
  [dbus-daemon]=dbus
  [xterm]=xterm
  [tmux]=tmux
  [kitty]=kitty
  [sway]=sway
  [foot]=foot
  [wl-copy]=wl-clipboard
  [xprop]=x11-utils
  [ssh]=openssh-client
  [ssh-keygen]=openssh-client
  [/usr/sbin/sshd]=openssh-server
)
missing=()
for program in "${!needed[@]}"; do
  command -v "$program" >/dev/null 2>&1 || missing+=("${needed[$program]}")
done
# Two programs may come from one package: install each once.
if [ "${#missing[@]}" -gt 0 ]; then
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
fi
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

# The real terminal agents (Claude Code, Codex CLI, Gemini CLI, opencode), pinned, for the tmux
# drive tests (tests/tests/terminal_drives.rs); they talk only to a local fake model server.
npm ci --prefix tests/agents --no-audit --no-fund --loglevel=error

cargo test --workspace --locked

# Smoke runs of the benchmarks (small counts; the figures are not meaningful, the code paths are):
# `cargo bench -p koru-system-tests` with `--bench` gives the figures (docs/benchmarks.md).
cargo test -p koru-system-tests --benches --locked

# MCP with the official Python SDK (pinned in tests/mcp-sdk/requirements.txt, in a cached virtualenv).
tests/mcp-sdk/run.sh

# The VS Code-family extension's own tests (node's test runner), with its pinned dev dependencies.
(cd plugins/vscode && npm ci --no-audit --no-fund --loglevel=error && npm test)

# The extension end to end inside a real VS Code build (code-server + headless Chromium)
# against the real daemon; it installs what it needs and fails, never skips, when it cannot.
plugins/vscode/e2e/run.sh

# The web dashboard in headless Chromium (playwright-core) against the real daemon with
# fake plugins; it installs Chromium if missing and fails, never skips, when it cannot run.
tests/browser/run.sh

# The JetBrains plugin: javac against the Debian IntelliJ Platform API jars, plugin.xml validation, JUnit 5
# (golden vectors, the protocol client against the real daemon) and the plugin zip; it apt-installs what it needs.
plugins/jetbrains/build.sh

# The desktop-portal route on a real headless GNOME 43 session (gnome-shell, the real
# xdg-desktop-portal and its GNOME backend, the consent dialog answered through AT-SPI) into a
# GTK stand-in IDE window that speaks the plugin protocol; it apt-installs what it needs and
# fails, never skips, when it cannot run.
tests/gnome/run.sh
