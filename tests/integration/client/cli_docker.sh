#!/usr/bin/env bash
# The CLI as a docker user expects it, against a real server and real sandboxes: exec's exit
# codes, stdin and byte-exact output; names; --format; cp of directories.
#   cli_docker.sh SBX_BINARY PROVIDER
set -uo pipefail
sbx=$1 provider=$2
. "$(dirname "$0")/server_env.sh"
[[ $(id -u) -eq 0 || $provider == process ]] || { echo "skip: needs root"; exit 77; }
start_server "$sbx"
fails=0 passes=0
check() { # description expected actual
  if [[ "$2" == "$3" ]]; then echo "ok: $1"; passes=$((passes+1))
  else echo "FAIL: $1: want [$2] got [$3]"; fails=$((fails+1)); fi
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; stop_server' EXIT

id=$("$sbx" create -q --provider "$provider" --timeout 600)

# ---- exec: exit codes as docker exec's ----
"$sbx" exec "$id" -- 'exit 7'; check "the command's exit code" 7 $?
"$sbx" exec "$id" -- no-such-command-here 2>/dev/null; check "127: not found" 127 $?
"$sbx" exec "$id" -- /etc/passwd 2>/dev/null; check "126: cannot execute" 126 $?
"$sbx" exec "$id" -- 'kill -TERM $$'; check "128+15: killed by SIGTERM" 143 $?
"$sbx" exec "$id" -- 'kill -KILL $$'; check "128+9: killed by SIGKILL" 137 $?
"$sbx" exec "$id" -- 'kill -USR1 $$'; check "128+10: killed by SIGUSR1" 138 $?
"$sbx" exec no-such-sandbox -- true 2>/dev/null; check "125: no such sandbox" 125 $?
SBX_HOST=http://127.0.0.1:1 "$sbx" exec "$id" -- true 2>/dev/null
check "125: server unreachable" 125 $?
"$sbx" exec "$id" 2>/dev/null; check "125: no command (usage)" 125 $?
"$sbx" exec -t "$id" -- true 2>/dev/null; check "125: -t without -i" 125 $?
"$sbx" exec --timeout 300 "$id" -- sleep 30 2>/dev/null; check "--timeout kills: 137" 137 $?

# ---- exec: byte-exact output, stdin ----
printf 'a\r\nb' >"$tmp/want"
"$sbx" exec "$id" -- 'printf "a\r\nb"' >"$tmp/got"
check "output byte-exact (CR kept, no newline added)" "$(od -c <"$tmp/want")" "$(od -c <"$tmp/got")"
"$sbx" exec "$id" -- 'printf out; printf err >&2' >"$tmp/o" 2>"$tmp/e"
check "stdout and stderr apart, unchanged" "out|err" "$(cat "$tmp/o")|$(cat "$tmp/e")"
head -c 3000000 /dev/urandom >"$tmp/in.bin"
"$sbx" exec -i "$id" -- cat <"$tmp/in.bin" >"$tmp/out.bin"; check "exec -i cat: rc" 0 $?
check "3 MB of binary through stdin and back" "$(sha256sum <"$tmp/in.bin")" "$(sha256sum <"$tmp/out.bin")"
"$sbx" exec -i "$id" -- 'sleep 1; cat' <"$tmp/in.bin" >"$tmp/out2.bin"
check "stdin waits for a slow reader (no overflow)" "$(sha256sum <"$tmp/in.bin")" "$(sha256sum <"$tmp/out2.bin")"
check "without -i stdin is empty" 0 "$("$sbx" exec "$id" -- 'wc -c' <"$tmp/in.bin")"
check "-i: the command sees EOF" "3000000" "$("$sbx" exec -i "$id" -- 'wc -c' <"$tmp/in.bin")"
check "exec -e and -w" "it's x|/tmp" "$("$sbx" exec -e V="it's x" -w /tmp "$id" -- 'echo "$V|$PWD"')"
"$sbx" exec "$id" -- yes | head -c 4 >/dev/null; check "a closed stdout ends the command: 141" 141 "${PIPESTATUS[0]}"
check "and kills it (no yes left running)" 0 "$("$sbx" exec "$id" -- 'pgrep -c -x yes || true')"

"$sbx" rm "$id" >/dev/null
echo "$passes passed, $fails failed"
[[ $fails == 0 ]] || { tail -20 "$SBX_TEST_STATE/server.log"; exit 1; }
