#!/usr/bin/env bash
# Starts a real terminal agent (installed by `npm ci --prefix tests/agents`) interactively
# in a new tmux session, under a HOME of its own with every first-run screen answered in
# advance, talking to the fake model server (tests/corpus/recorder/fake_model_server.py)
# and nothing else; waits until its input box is ready and prints the pane id.
#
# Usage: tests/agents/start-agent.sh AGENT WORKDIR
#   AGENT: claude-code | codex | gemini-cli | opencode
# Environment:
#   TMUX_SOCKET    tmux server socket (tmux -S), default /tmp/koru-agents.tmux
#   FAKE_MODEL_URL the fake model server, default http://127.0.0.1:8765 (must be running)
#   AGENT_ROOT     folder for the agent's HOME and launcher, default a new mktemp -d
#   OPENCODE_PORT  opencode only: serve the TUI's HTTP API on 127.0.0.1:PORT
#   CODEX_DAEMON   codex only: 1 to let Codex start its background app-server daemon
#   READY_TIMEOUT  seconds to wait for the input box, default 60
#   BLACKHOLE_PROXY the HTTP(S)_PROXY given to the agent, default http://127.0.0.1:9
#                  (nothing listens: a request to anywhere but 127.0.0.1 fails at once)
#   AGENT_WRAP     a command put before the agent's, word-split (e.g. "strace -f -o F")
#   COLS, ROWS     pane size, default 120x40
#   LAUNCH_SCRIPT  where to write the agent's exact command, default $AGENT_ROOT/launch.sh
#   LAUNCH_ONLY    1: only write the launch script and print its path (for a terminal
#                  other than tmux to run; that terminal's caller waits for readiness)
# Prints on stdout: the pane id (e.g. %3). On stderr: the HOME, the session name and how
# long the agent took to get ready. $LAUNCH_SCRIPT is the exact command run.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
BIN="$HERE/node_modules/.bin"
AGENT="${1:?usage: start-agent.sh AGENT WORKDIR}"
WORKDIR="$(cd "${2:?usage: start-agent.sh AGENT WORKDIR}" && pwd -P)"
TMUX_SOCKET="${TMUX_SOCKET:-/tmp/koru-agents.tmux}"
FAKE_MODEL_URL="${FAKE_MODEL_URL:-http://127.0.0.1:8765}"
FAKE_MODEL_URL="${FAKE_MODEL_URL%/}"
READY_TIMEOUT="${READY_TIMEOUT:-60}"
COLS="${COLS:-120}"
ROWS="${ROWS:-40}"
ROOT="${AGENT_ROOT:-$(mktemp -d "/tmp/koru-agent-$AGENT.XXXXXX")}"
ROOT="$(mkdir -p "$ROOT" && cd "$ROOT" && pwd -P)"
HOME_DIR="$ROOT/home"
LAUNCH_SCRIPT="${LAUNCH_SCRIPT:-$ROOT/launch.sh}"
mkdir -p "$HOME_DIR"
# The fake key; Claude Code approves an ANTHROPIC_API_KEY by its last 20 characters.
KEY="sk-koru-fake-0123456789abcdefghij"
KEY_SUFFIX="${KEY: -20}"

if ! curl -sf -m 2 "$FAKE_MODEL_URL/koru/prompts" >/dev/null; then
  echo "start-agent: no fake model server at $FAKE_MODEL_URL (start" \
    "tests/corpus/recorder/fake_model_server.py first)" >&2
  exit 2
fi

PROXY="${BLACKHOLE_PROXY:-http://127.0.0.1:9}"
# Every agent: this HOME, no proxy detours to the outside, a black-hole proxy for anything
# that is not the local server (a client that honours HTTPS_PROXY fails at once instead of
# reaching out), no telemetry where a variable exists for it.
COMMON=(
  HOME="$HOME_DIR" USER="${USER:-root}" LOGNAME="${USER:-root}" SHELL=/bin/bash
  PATH="/usr/local/bin:/usr/bin:/bin" TERM=xterm-256color COLORTERM=truecolor
  LANG=C.UTF-8 LC_ALL=C.UTF-8 TMPDIR="$ROOT/tmp"
  XDG_CONFIG_HOME="$HOME_DIR/.config" XDG_DATA_HOME="$HOME_DIR/.local/share"
  XDG_STATE_HOME="$HOME_DIR/.local/state" XDG_CACHE_HOME="$HOME_DIR/.cache"
  HTTPS_PROXY="$PROXY" HTTP_PROXY="$PROXY" https_proxy="$PROXY" http_proxy="$PROXY"
  NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost
  DO_NOT_TRACK=1 CI=
)
mkdir -p "$ROOT/tmp"

case "$AGENT" in
claude-code)
  mkdir -p "$HOME_DIR/.claude"
  python3 - "$HOME_DIR/.claude.json" "$WORKDIR" "$KEY_SUFFIX" <<'EOF'
import json, sys
path, workdir, suffix = sys.argv[1:]
json.dump({
    "numStartups": 1,
    "installMethod": "npm-local",
    "autoUpdates": False,
    "hasCompletedOnboarding": True,
    "lastOnboardingVersion": "2.1.332",
    "lastReleaseNotesSeen": "2.1.332",
    "theme": "dark",
    "hasSeenTasksHint": True,
    "hasUsedBackslashReturn": True,
    "shiftEnterKeyBindingInstalled": True,
    "hasAcknowledgedCostThreshold": True,
    "bypassPermissionsModeAccepted": False,
    # 2.1.332: the notice "Auto mode is now Claude Code's default permission mode" and,
    # with permissions.defaultMode set in settings.json, the question "Make auto mode
    # your default permission mode?" (a dialog that holds the input box).
    "hasSeenAutoDefaultNotice": True,
    "hasSeenAutoDefaultNudge": True,
    "customApiKeyResponses": {"approved": [suffix], "rejected": []},
    "projects": {workdir: {
        "allowedTools": [],
        "hasTrustDialogAccepted": True,
        "hasCompletedProjectOnboarding": True,
        "projectOnboardingSeenCount": 1,
        "hasClaudeMdExternalIncludesApproved": False,
        "hasClaudeMdExternalIncludesWarningShown": False,
    }},
}, open(path, "w"), indent=2)
EOF
  # 2.1.332 starts in "auto" permission mode (a classifier answers permission prompts);
  # "default" is the mode where the user is asked.
  cat >"$HOME_DIR/.claude/settings.json" <<'EOF'
{"autoUpdates": false, "theme": "dark", "permissions": {"defaultMode": "default"}}
EOF
  ENV=(ANTHROPIC_BASE_URL="$FAKE_MODEL_URL" ANTHROPIC_API_KEY="$KEY"
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 DISABLE_TELEMETRY=1
    DISABLE_ERROR_REPORTING=1 DISABLE_BUG_COMMAND=1 CLAUDE_CODE_DISABLE_TERMINAL_TITLE=1
    # Without these it clones the official plugin marketplace from github.com (git) and
    # fetches its model catalog from downloads.claude.ai.
    CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL=1 CLAUDE_CODE_MODEL_CATALOG=0)
  CMD=("$BIN/claude")
  # The input box: a line starting with "❯" between two horizontal rules.
  READY='^❯'
  ;;
codex)
  mkdir -p "$HOME_DIR/.codex"
  cat >"$HOME_DIR/.codex/config.toml" <<EOF
model = "fake-model"
model_provider = "fake"
check_for_update_on_startup = false

[model_providers.fake]
name = "Fake model server"
base_url = "$FAKE_MODEL_URL/v1"
wire_api = "responses"
env_key = "FAKE_MODEL_KEY"

[projects."$WORKDIR"]
trust_level = "trusted"

[features]
plugins = false

[tui]
show_tooltips = false

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"
EOF
  ENV=(CODEX_HOME="$HOME_DIR/.codex" FAKE_MODEL_KEY="$KEY")
  CMD=("$BIN/codex")
  # 0.171 runs the session in a background "app-server daemon" (copied into
  # $CODEX_HOME/packages, detached from the pane, still running after the TUI exits);
  # --no-daemon keeps it inside the TUI process. CODEX_DAEMON=1 starts Codex as a user
  # would, with the daemon.
  if [ "${CODEX_DAEMON:-0}" != 1 ]; then
    CMD+=(--no-daemon)
  fi
  READY='^› '
  ;;
gemini-cli)
  mkdir -p "$HOME_DIR/.gemini"
  cat >"$HOME_DIR/.gemini/settings.json" <<'EOF'
{
  "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": false}},
  "general": {"disableAutoUpdate": true, "disableUpdateNag": true, "enableAutoUpdate": false,
              "enableAutoUpdateNotification": false},
  "privacy": {"usageStatisticsEnabled": false},
  "telemetry": {"enabled": false},
  "ide": {"enabled": false, "hasSeenNudge": true},
  "ui": {"theme": "Default"}
}
EOF
  ENV=(GEMINI_API_KEY="$KEY" GOOGLE_GEMINI_BASE_URL="$FAKE_MODEL_URL"
    GEMINI_CLI_TRUST_WORKSPACE=true GEMINI_CLI_NO_RELAUNCH=true)
  CMD=("$BIN/gemini")
  READY='Type your message'
  ;;
opencode)
  mkdir -p "$HOME_DIR/.config/opencode"
  # opencode's defaults let every tool run without asking (only folders outside the
  # project and repeated identical calls ask): bash and edit are set to "ask" so that a
  # command brings up a permission prompt as in the other agents' default modes.
  cat >"$HOME_DIR/.config/opencode/opencode.json" <<EOF
{
  "\$schema": "https://opencode.ai/config.json",
  "autoupdate": false,
  "share": "disabled",
  "model": "fake/fake-model",
  "small_model": "fake/fake-model",
  "provider": {
    "fake": {
      "npm": "@ai-sdk/openai-compatible",
      "name": "Fake model server",
      "options": {"baseURL": "$FAKE_MODEL_URL/v1", "apiKey": "$KEY"},
      "models": {"fake-model": {"name": "Fake model", "tool_call": true,
                                "limit": {"context": 128000, "output": 8192}}}
    }
  },
  "enabled_providers": ["fake"],
  "permission": {"bash": "ask", "edit": "ask"}
}
EOF
  # opencode installs @opencode-ai/plugin (for local plugins) into each config folder from
  # the npm registry in the background, unless the folder has node_modules/ and a
  # package-lock.json that already lists it (its Npm.install "checkDirty"): an empty
  # node_modules/ and such a lock keep it off the network. No local plugin is used here.
  mkdir -p "$HOME_DIR/.config/opencode/node_modules"
  printf '%s\n' '{"name": "opencode-config", "lockfileVersion": 3, "packages":' \
    '{"": {"dependencies": {"@opencode-ai/plugin": "*"}}}}' \
    >"$HOME_DIR/.config/opencode/package-lock.json"
  ENV=(OPENCODE_DISABLE_MODELS_FETCH=true OPENCODE_DISABLE_AUTOUPDATE=true
    OPENCODE_DISABLE_LSP_DOWNLOAD=true OPENCODE_DISABLE_SHARE=true
    OPENCODE_DISABLE_DEFAULT_PLUGINS=true OPENCODE_DISABLE_EXTERNAL_SKILLS=true)
  CMD=("$BIN/opencode")
  if [ -n "${OPENCODE_PORT:-}" ]; then
    CMD+=(--port "$OPENCODE_PORT" --hostname 127.0.0.1)
  fi
  READY='Ask anything'
  ;;
*)
  echo "start-agent: unknown agent $AGENT (claude-code|codex|gemini-cli|opencode)" >&2
  exit 2
  ;;
esac

# Koru's side, for tests of Koru's drives: the agent's hooks reach the daemon at
# KORU_SOCKET, and with KORU_HOOK_BIN (a koru binary) Koru's hooks are installed into the
# agent's own settings before it starts (`koru hook install AGENT`). Codex runs a new hook
# only once the user trusts it in /hooks: here it is started trusting them instead.
if [ -n "${KORU_SOCKET:-}" ]; then
  COMMON+=(KORU_SOCKET="$KORU_SOCKET")
fi
if [ -n "${KORU_HOOK_BIN:-}" ]; then
  case "$AGENT" in
  claude-code | codex | gemini-cli)
    env HOME="$HOME_DIR" CODEX_HOME="$HOME_DIR/.codex" "$KORU_HOOK_BIN" hook install "$AGENT" >&2
    ;;
  *)
    echo "start-agent: $AGENT has no hooks for Koru" >&2
    exit 2
    ;;
  esac
  if [ "$AGENT" = codex ]; then
    CMD+=(--dangerously-bypass-hook-trust)
  fi
fi

# The exact command, as a script of its own: tmux runs it, `exec` makes the agent the
# pane's first process (pane_pid).
{
  echo '#!/bin/sh'
  printf 'cd %q || exit 1\n' "$WORKDIR"
  printf 'exec'
  # AGENT_WRAP: words put before the agent (e.g. strace to see every connect()).
  [ -z "${AGENT_WRAP:-}" ] || printf ' %s' "$AGENT_WRAP"
  printf ' env -i'
  printf ' %q' "${COMMON[@]}" "${ENV[@]}" "${CMD[@]}"
  printf '\n'
} >"$LAUNCH_SCRIPT"
chmod +x "$LAUNCH_SCRIPT"
if [ "${LAUNCH_ONLY:-0}" = 1 ]; then
  echo "$LAUNCH_SCRIPT"
  exit 0
fi

SESSION="koru-$AGENT-$(basename "$ROOT" | tr -c 'A-Za-z0-9-\n' '-')"
START=$(date +%s.%N)
PANE=$(tmux -S "$TMUX_SOCKET" new-session -d -P -F '#{pane_id}' -s "$SESSION" \
  -x "$COLS" -y "$ROWS" -c "$WORKDIR" "$LAUNCH_SCRIPT")
# Keep the pane (and its last screen) when the agent exits, for a test to read.
tmux -S "$TMUX_SOCKET" set-option -p -t "$PANE" remain-on-exit on >/dev/null

deadline=$(($(date +%s) + READY_TIMEOUT))
while :; do
  screen="$(tmux -S "$TMUX_SOCKET" capture-pane -p -J -t "$PANE" 2>/dev/null || true)"
  if grep -qE -- "$READY" <<<"$screen"; then
    break
  fi
  if [ "$(tmux -S "$TMUX_SOCKET" display-message -p -t "$PANE" '#{pane_dead}' 2>/dev/null)" = 1 ] ||
    [ "$(date +%s)" -ge "$deadline" ]; then
    echo "start-agent: $AGENT not ready after ${READY_TIMEOUT}s; its screen:" >&2
    printf '%s\n' "$screen" >&2
    echo "$PANE"
    exit 1
  fi
  sleep 0.2
done
# Then until the screen stops changing (1 s unchanged, at most 5 s): right after its input
# box shows, an agent may still be starting (Gemini CLI under load dropped a prompt typed
# then), and a test's first prompt is not about start-up.
previous=""
same=0
for _ in $(seq 25); do
  screen="$(tmux -S "$TMUX_SOCKET" capture-pane -p -J -t "$PANE" 2>/dev/null || true)"
  if [ "$screen" = "$previous" ]; then
    same=$((same + 1))
    [ "$same" -ge 5 ] && break
  else
    same=0
    previous="$screen"
  fi
  sleep 0.2
done
READY_AT=$(date +%s.%N)
printf 'start-agent: %s ready in %.1fs; session %s; HOME %s\n' "$AGENT" \
  "$(awk "BEGIN{print $READY_AT - $START}")" "$SESSION" "$HOME_DIR" >&2
echo "$PANE"
