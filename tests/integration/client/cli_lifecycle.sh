#!/usr/bin/env bash
# The whole lifecycle through the CLI against a real server and real sandboxes.
#   cli_lifecycle.sh SBX_BINARY PROVIDER
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

id=$("$sbx" create -q --provider "$provider" --timeout 600 -l suite=cli -e GREETING=hi)
check "create prints an id" 1 "$([[ $id =~ ^[0-9a-f-]{36}$ ]] && echo 1)"
check "ls shows it Running" Running "$("$sbx" ls | awk -v id="$id" '$1==id {print $2}')"
check "ls --json filters by metadata" "$id" "$("$sbx" ls --json -l suite=cli | python3 -c 'import json,sys; print(",".join(json.loads(l)["id"] for l in sys.stdin))')"
check "ls filters by state" "" "$("$sbx" ls --json -s Paused -l suite=cli)"
check "inspect gives a JSON array with the id" "$id" "$("$sbx" inspect "$id" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')"
check "ls -q prints ids only" 1 "$("$sbx" ls -q | grep -cx "$id")"
# ids by a unique prefix, as docker: 12 characters, and one shared by no other sandbox
check "inspect by an id prefix" "$id" "$("$sbx" inspect "${id:0:12}" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')"
check "exec by an id prefix" prefix-ok "$("$sbx" exec "${id:0:8}" -- echo prefix-ok)"
id2=$("$sbx" create -q --provider "$provider" --timeout 600 -l suite=cli2)
check "inspect of two ids: one array" 2 "$("$sbx" inspect "$id" "$id2" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')"
"$sbx" inspect zzzz 2>/tmp/sbx-cli-err.$$; check "an unknown prefix fails" 1 $?
check "and says so" 1 "$(grep -c 'no sandbox is named `zzzz` or has an id starting with it' /tmp/sbx-cli-err.$$)"
# a second sandbox whose id starts like the first one's (random ids: 16 creates on average;
# 64 tries missed 1.6 % of the time, 400 miss one run in ~170 million)
extra=()
for _ in $(seq 400); do
  [[ ${id2:0:1} == "${id:0:1}" ]] && break
  extra+=("$id2"); id2=$("$sbx" create -q --provider "$provider" --timeout 600)
done
check "a second id with the first one's first character" "${id:0:1}" "${id2:0:1}"
"$sbx" inspect "${id:0:1}" 2>/tmp/sbx-cli-err.$$ >/dev/null; check "an ambiguous prefix fails" 1 $?
check "and lists the candidates" 1 "$(grep -c "$id2" /tmp/sbx-cli-err.$$)"
"$sbx" inspect "" 2>/dev/null >/dev/null; check "an empty id fails" 1 $?
rm -f /tmp/sbx-cli-err.$$
"$sbx" rm "$id2" "${extra[@]}"

out=$("$sbx" exec "$id" -- 'echo $GREETING; echo err >&2; exit 7' 2>/tmp/sbx-cli-err.$$); rc=$?
check "exec streams stdout" hi "$out"
check "exec streams stderr" err "$(cat /tmp/sbx-cli-err.$$)"; rm -f /tmp/sbx-cli-err.$$
check "exec exits with the command's code" 7 "$rc"
check "exec quotes several words" "a b|c" "$("$sbx" exec "$id" -- printf '%s|%s\n' 'a b' c)"
check "exec -w sets the directory" /tmp "$("$sbx" exec -w /tmp "$id" -- pwd)"

tmp=$(mktemp -d)
head -c 300000 /dev/urandom >"$tmp/in.bin"; chmod 640 "$tmp/in.bin"
"$sbx" cp "$tmp/in.bin" "$id:/tmp/copied.bin"; check "cp into the sandbox" 0 $?
check "the copy keeps its mode" 640 "$("$sbx" exec "$id" -- stat -c %a /tmp/copied.bin)"
"$sbx" cp "$id:/tmp/copied.bin" "$tmp/out.bin"; check "cp out of the sandbox" 0 $?
check "round trip is identical" "$(sha256sum <"$tmp/in.bin")" "$(sha256sum <"$tmp/out.bin")"
"$sbx" cp "$id:/no/such/file" "$tmp/none" 2>/dev/null; check "cp of a missing file fails" 1 $?
check "a failed cp leaves no file" 0 "$(ls "$tmp" | grep -c none)"
# A local user plants symlinks at every name a download's partial file could have had
# (<dst>.sbx-partial.<pid>, the next 3000 pids): the download must not write through them.
echo victim-untouched >"$tmp/victim"
next=$(sh -c 'echo $$')
for p in $(seq "$next" $((next + 3000))); do ln -s "$tmp/victim" "$tmp/dl.bin.sbx-partial.$p"; done
"$sbx" cp "$id:/tmp/copied.bin" "$tmp/dl.bin"; check "cp out next to planted symlinks" 0 $?
check "the symlinks' target is untouched" victim-untouched "$(cat "$tmp/victim")"
check "the download landed" "$(sha256sum <"$tmp/in.bin")" "$(sha256sum <"$tmp/dl.bin")"
check "no partial file left" 3001 "$(find "$tmp" -name 'dl.bin.sbx-partial.*' | wc -l)"
rm -rf "$tmp"

"$sbx" pause "$id"; check "pause" 0 $?
check "state Paused" Paused "$("$sbx" ls | awk -v id="$id" '$1==id {print $2}')"
"$sbx" pause "$id" 2>/dev/null; check "pause twice is a conflict" 1 $?
"$sbx" resume "$id"; check "resume" 0 $?
check "works after resume" back "$("$sbx" exec "$id" -- echo back)"
"$sbx" exec "$id" -- sh -c 'echo kept > $HOME/stop-marker'
"$sbx" stop "$id"; check "stop" 0 $?
check "state Stopped" Stopped "$("$sbx" ls | awk -v id="$id" '$1==id {print $2}')"
"$sbx" stop "$id" 2>/dev/null; check "stop twice is a conflict" 1 $?
"$sbx" exec "$id" -- true 2>/dev/null; check "exec in a stopped sandbox fails: 125" 125 $?
"$sbx" start "$id"; check "start" 0 $?
check "files survive stop/start" kept "$("$sbx" exec "$id" -- sh -c 'cat $HOME/stop-marker')"
"$sbx" start "$id" 2>/dev/null; check "start a running sandbox is a conflict" 1 $?
r1=$("$sbx" create -q --provider "$provider" --reuse-key cli:reuse)
r2=$("$sbx" create -q --provider "$provider" --reuse-key cli:reuse)
check "create --reuse-key twice: one sandbox" "$r1" "$r2"
"$sbx" rm "$r1"
exp=$("$sbx" renew "$id" 3600); check "renew prints the new expiry" 1 "$([[ $exp == 20* ]] && echo 1)"
"$sbx" rm "$id"; check "rm" 0 $?
"$sbx" inspect "$id" 2>/dev/null; check "inspect after rm fails" 1 $?
"$sbx" exec "$id" -- true 2>/dev/null; check "exec in a removed sandbox fails: 125" 125 $?
# Many creates at once (the server creates on worker threads: a sandbox child cloned from a
# multi-threaded process must not wait for threads it does not have).
tmp=$(mktemp -d)
pids=()
for i in $(seq 16); do "$sbx" create -q --provider "$provider" >"$tmp/$i" 2>&1 & pids+=($!); done
wait "${pids[@]}" # not a bare wait: the server is a background job of this shell too
ok=0
for i in $(seq 16); do [[ $(cat "$tmp/$i") =~ ^[0-9a-f-]{36}$ ]] && ok=$((ok+1)) || echo "create $i: $(cat "$tmp/$i")"; done
check "16 concurrent creates all succeed" 16 "$ok"
for i in $(seq 16); do "$sbx" rm "$(cat "$tmp/$i")" 2>/dev/null; done
rm -rf "$tmp"

"$sbx" ls --host http://127.0.0.1:1 2>/dev/null; check "unreachable server is a failure" 1 $?
SBX_API_KEY=wrong "$sbx" ls 2>/dev/null; check "a wrong key is refused" 1 $?
# The key never on the command line (ps shows it to every user): --api-key is refused with
# the ways that work, --api-key-file reads a file or stdin.
out=$("$sbx" ls --api-key "$SBX_API_KEY" 2>&1); rc=$?
check "--api-key is refused (usage)" 2 "$rc"
[[ $out == *--api-key-file* && $out != *"$SBX_API_KEY"* ]]; check "it says what to use instead" 0 $?
keyfile=$(mktemp); printf ' %s\n' "$SBX_API_KEY" >"$keyfile"
SBX_API_KEY=wrong "$sbx" ls --api-key-file "$keyfile" >/dev/null; check "--api-key-file FILE" 0 $?
printf '%s' "$SBX_API_KEY" | SBX_API_KEY=wrong "$sbx" ls --api-key-file - >/dev/null
check "--api-key-file - (stdin)" 0 $?
rm -f "$keyfile"

echo "$passes passed, $fails failed"
[[ $fails -eq 0 ]]
