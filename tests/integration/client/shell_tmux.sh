#!/usr/bin/env bash
# `sbx shell` and `sbx exec -it` on a real terminal: tmux runs the CLI in a pane (send-keys
# types, capture-pane reads the screen) against a real server and sandbox. The prompt, a
# command's output, job control on, Ctrl-C interrupting a sleep in the sandbox, the window
# size at start and after `tmux resize-window`, the exit code, the local terminal's settings
# restored, exec -it with a command, stdin that is not a terminal refused.
#   shell_tmux.sh SBX_BINARY [PROVIDER]   (default provider: native)
set -uo pipefail
sbx=$1
provider=${2:-native}
here=$(cd "$(dirname "$0")" && pwd)
command -v tmux >/dev/null || { echo "SKIP: tmux is not installed (scripts/deps.sh)"; exit 77; }
. "$here/server_env.sh"
start_server "$sbx"
fails=0
ok() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

sock=$SBX_TEST_STATE/tmux.sock
T() { tmux -S "$sock" -f /dev/null "$@"; }
cleanup() { T kill-server 2>/dev/null; stop_server; }
trap cleanup EXIT

id=$("$sbx" create -q --provider "$provider" --timeout 600) || { echo "FAIL: create"; exit 1; }
screen() { T capture-pane -p -J -t "$1" -S -200; }
# wait_for PANE REGEX [SECONDS]: until the pane shows a line matching REGEX
wait_for() {
  local pane=$1 re=$2 n=$((${3:-20} * 10))
  for _ in $(seq "$n"); do
    screen "$pane" | grep -Eq -- "$re" && return 0
    sleep 0.1
  done
  echo "---- pane $pane ----"; screen "$pane"; echo "----"
  return 1
}
size() { T display -p -t "$1" '#{pane_height} #{pane_width}'; }

run_in_pane() { # NAME COMMAND: a pane of its own, environment of the server test
  T new-session -d -x 100 -y 30 -s "$1" \
    "export SBX_HOST=$SBX_HOST SBX_API_KEY=$SBX_API_KEY; stty -g > $SBX_TEST_STATE/$1.before;
     $2; echo $1-EXIT=\$?; stty -g > $SBX_TEST_STATE/$1.after; sleep 600"
  T set -t "$1" status off
}

run_in_pane sh "$sbx shell $id"
T send-keys -t sh 'echo hello-$((6*7))' Enter
wait_for sh '^hello-42' && ok "the shell answers in the sandbox" || fail "no output"
T send-keys -t sh 'hostname; set -o | grep -w monitor' Enter
wait_for sh '^monitor +on' && ok "job control on" || fail "job control off"
T send-keys -t sh 'stty size' Enter
want=$(size sh)
wait_for sh "^$want\$" && ok "window size at start ($want)" || fail "stty size, want $want"
T send-keys -t sh 'echo go; sleep 100' Enter
wait_for sh '^go$' || fail "sleep not started"
sleep 0.5
T send-keys -t sh C-c
T send-keys -t sh 'echo rc=$?' Enter
wait_for sh '^rc=130' 5 && ok "Ctrl-C interrupted the sandbox's sleep" || fail "Ctrl-C"
T resize-window -t sh -x 120 -y 40
sleep 0.3
T send-keys -t sh 'clear; stty size' Enter
want=$(size sh)
wait_for sh "^$want\$" && ok "window size follows resize-window ($want)" || fail "resize, want $want"
T send-keys -t sh 'exit 7' Enter
wait_for sh '^sh-EXIT=7$' && ok "exit code 7" || fail "exit code"
if cmp -s "$SBX_TEST_STATE/sh.before" "$SBX_TEST_STATE/sh.after"; then
  ok "the local terminal's settings restored"
else
  fail "terminal settings differ: $(cat "$SBX_TEST_STATE/sh.before") / $(cat "$SBX_TEST_STATE/sh.after")"
fi

run_in_pane ex "$sbx exec -it ${id:0:12} -- sh -c 'tty; read x; echo got-\$x; exit 4'"
wait_for ex '^/dev/pts/' && ok "exec -it: a terminal in the sandbox" || fail "exec -it tty"
T send-keys -t ex 'abc' Enter
wait_for ex '^got-abc' && ok "exec -it: stdin" || fail "exec -it stdin"
wait_for ex '^ex-EXIT=4$' && ok "exec -it: exit code 4" || fail "exec -it exit code"

out=$(echo | "$sbx" shell "$id" 2>&1); rc=$?
[[ $rc == 1 && $out == *"not a terminal"* ]] && ok "stdin not a terminal: refused" ||
  fail "non-tty: rc $rc: $out"
out=$("$sbx" exec -t "$id" -- true 2>&1); rc=$?
[[ $rc == 125 && $out == *"-t needs -i"* ]] && ok "-t alone: usage error (125)" ||
  fail "-t alone: rc $rc: $out"
out=$(echo piped | "$sbx" exec -i "$id" -- cat 2>&1); rc=$?
[[ $rc == 0 && $out == piped ]] && ok "-i alone: stdin on a pipe" || fail "-i alone: rc $rc: $out"

"$sbx" rm "$id" >/dev/null
[[ $fails == 0 ]] || { echo "$fails failed"; cat "$SBX_TEST_STATE/server.log" | tail -20; exit 1; }
echo "all ok"
