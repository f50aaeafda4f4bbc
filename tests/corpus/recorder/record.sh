#!/usr/bin/env bash
# Records real history files of Codex CLI, Gemini CLI, Claude Code and the Cline CLI (3.x,
# SDK sessions; 2.x, Cline's classic task folders) for tests/corpus/:
# installs the tools into a temporary folder (npm, never into the repository), starts the
# fake model server beside this script, runs each tool's non-interactive mode under its
# own temporary HOME against it, and prints where each history file was written. Copy the
# files into tests/corpus/<store>/ unchanged and write their `.expect.json` by reading
# them. Not run in CI: the corpus files are committed and the replay test only reads them.
#
# Usage: tests/corpus/recorder/record.sh [codex|gemini|claude|cline|cline2 ...]   (all by default)
# Environment: REC (the work folder, /tmp/koru-rec), PORT (8765), TOOLS (where npm installs
# the tools, $REC/tools; an existing install there is reused), CLINE2 (the 2.x version of
# the Cline CLI, 2.18.0; installed in $REC/tools-cline2, beside the 3.x one).
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
REC="${REC:-/tmp/koru-rec}"
PORT="${PORT:-8765}"
TOOLS="${TOOLS:-$REC/tools}"
BIN="$TOOLS/node_modules/.bin"
mkdir -p "$REC"

if [ ! -x "$BIN/codex" ] || [ ! -x "$BIN/gemini" ] || [ ! -x "$BIN/claude" ] ||
  [ ! -x "$BIN/cline" ]; then
  mkdir -p "$TOOLS"
  (cd "$TOOLS" && npm init -y >/dev/null &&
    npm install @openai/codex @google/gemini-cli @anthropic-ai/claude-code cline)
fi

python3 "$HERE/fake_model_server.py" --port "$PORT" --log "$REC/fake-model.log" &
SERVER=$!
trap 'kill $SERVER' EXIT
sleep 1

# A small project for the tools to work in: two files for `ls` to list.
project() {
  local dir="$1"
  rm -rf "$dir" && mkdir -p "$dir"
  printf 'hello\n' >"$dir/notes.txt"
  printf 'print("hi")\n' >"$dir/hello.py"
}

record_codex() {
  local root="$REC/codex"
  rm -rf "$root" && mkdir -p "$root/home/.codex"
  project "$root/demo"
  cat >"$root/home/.codex/config.toml" <<EOF
model = "fake-model"
model_provider = "fake"

[model_providers.fake]
name = "Fake model server"
base_url = "http://127.0.0.1:$PORT/v1"
wire_api = "responses"
env_key = "FAKE_MODEL_KEY"
EOF
  local codex=(env HOME="$root/home" CODEX_HOME="$root/home/.codex" FAKE_MODEL_KEY=dummy
    "$BIN/codex" exec --skip-git-repo-check)
  cd "$root/demo"
  "${codex[@]}" "What is the capital of France? Answer in one sentence." </dev/null
  sleep 1.1 # one rollout per second: the file names carry the time
  "${codex[@]}" "Please run ls in this folder and tell me what it prints." </dev/null
  sleep 1.1
  "${codex[@]}" "What is the capital of France? Answer in one sentence." </dev/null
  "${codex[@]}" resume --last "And of Italy? One sentence too." </dev/null
  find "$root/home/.codex/sessions" -name 'rollout-*.jsonl' | sort
}

record_gemini() {
  local root="$REC/gemini"
  rm -rf "$root" && mkdir -p "$root/home/.gemini"
  project "$root/demo"
  # GOOGLE_GEMINI_BASE_URL alone selects the "gateway" auth type, which headless mode
  # rejects; an API key sent to the base URL is the `gemini-api-key` type.
  echo '{"security":{"auth":{"selectedType":"gemini-api-key"}}}' >"$root/home/.gemini/settings.json"
  local gemini=(env HOME="$root/home" GEMINI_API_KEY=dummy
    GOOGLE_GEMINI_BASE_URL="http://127.0.0.1:$PORT" GEMINI_CLI_TRUST_WORKSPACE=true
    "$BIN/gemini")
  cd "$root/demo"
  "${gemini[@]}" -p "What is the capital of France? Answer in one sentence." </dev/null
  sleep 1.1
  "${gemini[@]}" --approval-mode yolo -p "Please run ls in this folder and tell me what it prints." </dev/null
  sleep 1.1
  "${gemini[@]}" -p "What is the capital of France? Answer in one sentence." </dev/null
  "${gemini[@]}" --resume latest -p "And of Italy? One sentence too." </dev/null
  find "$root/home/.gemini/tmp" -type f | sort
}

record_claude() {
  local root="$REC/claude"
  rm -rf "$root" && mkdir -p "$root/home"
  project "$root/demo"
  local claude=(env HOME="$root/home" ANTHROPIC_BASE_URL="http://127.0.0.1:$PORT"
    ANTHROPIC_API_KEY=dummy CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1
    "$BIN/claude")
  cd "$root/demo"
  "${claude[@]}" -p "What is the capital of France? Answer in one sentence." </dev/null
  sleep 1.1
  "${claude[@]}" -p "Please run ls in this folder and tell me what it prints." --allowedTools "Bash(ls)" </dev/null
  sleep 1.1
  "${claude[@]}" -p "What is the capital of France? Answer in one sentence." </dev/null
  "${claude[@]}" -p --continue "And of Italy? One sentence too." </dev/null
  find "$root/home/.claude/projects" -type f | sort
}

record_cline() {
  local root="$REC/cline"
  rm -rf "$root" && mkdir -p "$root/home"
  project "$root/demo"
  local sessions="$root/home/.cline/data/sessions"
  local cline=(env HOME="$root/home" "$BIN/cline")
  cd "$root/demo"
  # `anthropic` refuses a base URL; `openai` with one is saved as `openai-compatible`
  # (Chat Completions).
  "${cline[@]}" auth --provider openai --apikey dummy --modelid fake-model \
    --baseurl "http://127.0.0.1:$PORT/v1"
  # One-shot runs auto-approve tools; the first one starts Cline's hub daemon, which runs
  # the later sessions.
  "${cline[@]}" "What is the capital of France? Answer in one sentence." </dev/null
  sleep 1.1
  "${cline[@]}" "Please run ls in this folder and tell me what it prints." </dev/null
  sleep 1.1
  "${cline[@]}" "What is the capital of France? Answer in one sentence." </dev/null
  # A second turn: `--id` opens the TUI, which needs a terminal and ignores a prompt given
  # with it, so the prompt is typed into it under script(1), then Ctrl-C twice.
  local last
  last="$(ls -t "$sessions" | head -1)"
  (sleep 6; printf 'And of Italy? One sentence too.'; sleep 1; printf '\r'; sleep 10
    printf '\003'; sleep 1; printf '\003'; sleep 3) |
    env HOME="$root/home" TERM=xterm-256color timeout 40 \
      script -qfec "stty cols 120 rows 40; $BIN/cline --id $last" /dev/null >/dev/null
  # The hub daemon this HOME started (its record names its pid).
  local hub
  hub="$(pgrep -f -- "--cline-hub-daemon --cwd $root/demo" || true)"
  [ -z "$hub" ] || kill $hub
  find "$sessions" -type f | sort
}

record_cline2() {
  local root="$REC/cline2"
  local version="${CLINE2:-2.18.0}"
  local tools="$REC/tools-cline2"
  if [ ! -x "$tools/node_modules/.bin/cline" ]; then
    mkdir -p "$tools"
    (cd "$tools" && npm init -y >/dev/null && npm install "cline@$version")
  fi
  rm -rf "$root" && mkdir -p "$root/home"
  project "$root/demo"
  local tasks="$root/home/.cline/data/tasks"
  local cline=(env HOME="$root/home" "$tools/node_modules/.bin/cline")
  cd "$root/demo"
  # The classic core's `openai` provider with a base URL speaks Chat Completions with
  # tools in XML, which the fake model answers in kind.
  "${cline[@]}" auth --provider openai --apikey dummy --modelid fake-model \
    --baseurl "http://127.0.0.1:$PORT/v1" </dev/null
  # Every state of each ui_messages.json (rewritten whole on each change) as it is written.
  python3 "$HERE/capture_rewrites.py" --root "$tasks" --out "$root/rewrites" &
  local capture=$!
  # `-y` (yolo) approves every tool and answers for the user; the task ends when the
  # model calls attempt_completion.
  "${cline[@]}" task -y "What is the capital of France? Answer in one sentence." </dev/null
  sleep 1.1
  "${cline[@]}" task -y "Please run ls in this folder and tell me what it prints." </dev/null
  sleep 1.1
  "${cline[@]}" task -y "What is the capital of France? Answer in one sentence." </dev/null
  # A second turn in the same task: `-T <id>` reopens it with a new prompt.
  local last
  last="$(ls -t "$tasks" | head -1)"
  "${cline[@]}" task -y -T "$last" "And of Italy? One sentence too." </dev/null
  sleep 1.1
  # Without `-y` the question waits for an answer that never comes (no terminal); the
  # CLI is then stopped with SIGTERM, as a user stops it.
  timeout -s TERM 15 "${cline[@]}" task "Look at the files here, but ask me which one first." \
    </dev/null || true
  sleep 1
  kill "$capture" && wait "$capture" || true
  find "$root/home/.cline/data/tasks" "$root/home/.cline/data/state" -type f | sort
  find "$root/rewrites" -type f | sort
}

for tool in "${@:-codex gemini claude cline cline2}"; do
  for name in $tool; do
    "record_$name"
  done
done
