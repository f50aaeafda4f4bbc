#!/usr/bin/env bash
# Captures the README's "A Claude Code pane" walkthrough: a real Claude Code (tests/agents, `npm ci --prefix tests/agents`) in a tmux pane with Koru's hooks, a daemon of its own, the local fake model server; everything under /tmp/koru-walk. Run from anywhere after `cargo build --bin koru`.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
KORU="${KORU_BIN:-$REPO/target/debug/koru}"
W=/tmp/koru-walk
rm -rf $W; mkdir -p $W/home $W/run $W/config $W/state "$W/tmux/tmux-$(id -u)" $W/home/src/myrepo
chmod 700 $W/run "$W/tmux/tmux-$(id -u)"
printf '# myrepo\n\nA small parser for INI files, with tests.\n' > $W/home/src/myrepo/README.md
export HOME=$W/home XDG_RUNTIME_DIR=$W/run XDG_CONFIG_HOME=$W/config XDG_STATE_HOME=$W/state TMUX_TMPDIR=$W/tmux KORU_SOCKET=$W/run/koru/koru.sock
python3 $REPO/tests/corpus/recorder/fake_model_server.py --port 8777 --log $W/model.log >/dev/null 2>&1 &
MODEL=$!
$KORU daemon > $W/daemon.log 2>&1 &
DAEMON=$!
trap 'tmux -S "$W/tmux/tmux-$(id -u)/default" kill-server 2>/dev/null; kill $DAEMON $MODEL 2>/dev/null' EXIT
sleep 2
TMUX_SOCKET="$W/tmux/tmux-$(id -u)/default" AGENT_ROOT=$W FAKE_MODEL_URL=http://127.0.0.1:8777 KORU_HOOK_BIN=$KORU READY_TIMEOUT=90 \
  bash $REPO/tests/agents/start-agent.sh claude-code $W/home/src/myrepo > $W/pane.txt 2>$W/start.log
cd $W/home/src/myrepo
echo '$ koru sessions'
$KORU sessions
echo
echo '$ koru send --agent claude-code --workspace ~/src/myrepo --wait-reply "Summarise README.md in one sentence."'
$KORU send --agent claude-code --workspace ~/src/myrepo --wait-reply "Summarise README.md in one sentence." 2>&1
