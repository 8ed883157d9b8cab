#!/usr/bin/env bash
# `sbx run -it` on a real terminal: tmux runs it in a pane (send-keys types, capture-pane
# reads). The command's terminal has the pane's size and follows `tmux resize-window`, job
# control works (a background job is listed), Ctrl-C interrupts a sleep in the sandbox without
# ending the run, the exit code is the shell's, the pane's terminal settings are restored; -t
# without -i gets no input; a run without -t still has no terminal.
source "$(dirname "$0")/common.sh" "$@"
command -v tmux >/dev/null || skip "tmux is not installed (scripts/deps.sh)"
sock=$TMP/tmux.sock
T() { tmux -S "$sock" -f /dev/null "$@"; }
trap 'T kill-server 2>/dev/null; cleanup' EXIT
screen() { T capture-pane -p -J -t run -S -200; }
wait_for() { # REGEX [SECONDS]
  for _ in $(seq $((${2:-20} * 10))); do screen | grep -Eq -- "$1" && return 0; sleep 0.1; done
  echo "---- screen ----"; screen; fail "timed out waiting for /$1/"
}
T new-session -d -s run -x 90 -y 25 "bash --norc -i"
T send-keys -t run "export PS1='host\$ '; stty -a | grep -o 'icanon\\|-icanon' > $TMP/before" Enter
wait_for '^host\$'
T send-keys -t run "SBX_STATE_DIR=$SBX_STATE_DIR SBX_CGROUP_PARENT=$SBX_CGROUP_PARENT $SBX run -it -- bash --norc -i" Enter
wait_for '^bash-[0-9.]+# '
T send-keys -t run "stty size; echo job-\$((6*7))" Enter
wait_for '^job-42'
screen | grep -q '^25 90' || fail "the command's terminal is 25x90: $(screen | grep -E '^[0-9]+ [0-9]+$')"
T resize-window -t run -x 70 -y 20
sleep 0.3
T send-keys -t run "stty size" Enter
wait_for '^20 70'
T send-keys -t run "sleep 300" Enter
sleep 0.5
T send-keys -t run C-c
wait_for '^\^C'
T send-keys -t run "echo still-here; sleep 100 & jobs" Enter
wait_for '^\[1\]\+ +Running +sleep 100'
T send-keys -t run "exit 5" Enter
wait_for '^host\$ *$'
T send-keys -t run "echo rc=\$?; stty -a | grep -o 'icanon\\|-icanon' > $TMP/after" Enter
wait_for '^rc=5'
sleep 0.2
[[ $(cat "$TMP/before") == "$(cat "$TMP/after")" ]] || fail "terminal settings not restored"
# -t without -i: the command reads no input (EOF at once), its output still shows
out=$(echo typed | timeout 20 "$SBX" run -t -- bash -c 'read -t 5 x; echo "got[$x]"' | tr -d '\r')
[[ $out == "got[]" ]] || fail "-t without -i: $out"
# without -t there is still no terminal
out=$(timeout 20 "$SBX" run -- bash -c 'test -t 0 && echo tty || echo no-tty')
[[ $out == no-tty ]] || fail "run without -t: $out"
echo "ok"
