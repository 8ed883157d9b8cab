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
head -c 20000000 /dev/zero >"$tmp/big.in"
check "output before reading stdin: no deadlock (20 MB each way)" 20000000 \
  "$(timeout 60 "$sbx" exec -i "$id" -- 'head -c 20000000 /dev/zero; cat >/dev/null' <"$tmp/big.in" | wc -c)"
rm -f "$tmp/big.in"
check "without -i stdin is empty" 0 "$("$sbx" exec "$id" -- 'wc -c' <"$tmp/in.bin")"
check "-i: the command sees EOF" "3000000" "$("$sbx" exec -i "$id" -- 'wc -c' <"$tmp/in.bin")"
check "exec -e and -w" "it's x|/tmp" "$("$sbx" exec -e V="it's x" -w /tmp "$id" -- 'echo "$V|$PWD"')"
"$sbx" exec "$id" -- yes | head -c 4 >/dev/null; check "a closed stdout ends the command: 141" 141 "${PIPESTATUS[0]}"
check "and kills it (no yes left running)" 0 "$("$sbx" exec "$id" -- 'pgrep -c -x yes || true')"

# a fast command's output is whole even when its exit crosses our eof (execd and the router
# close lingering, not with a reset that would drop the unread end)
short=0
for _ in $(seq 20); do
  [[ $("$sbx" exec "$id" -- 'head -c 600000 /dev/zero' | wc -c) == 600000 ]] || short=$((short+1))
done
check "20 fast 600 kB outputs, none cut short" 0 "$short"

# ---- cp of directories (tar streams), as docker cp ----
mkdir -p "$tmp/tree/sub/deeper"
echo hello >"$tmp/tree/a.txt"; head -c 300000 /dev/urandom >"$tmp/tree/sub/bin"
chmod 750 "$tmp/tree/sub/bin"; ln -s a.txt "$tmp/tree/link"; touch "$tmp/tree/sub/deeper/sp ace"
r=$("$sbx" exec "$id" -- mktemp -d /tmp/sbx-cp-test-XXXXXX) # the process provider shares /tmp
listing() { (cd "$1" && find . -printf '%y %m %p %l\n' | sort); }
"$sbx" cp "$tmp/tree" "$id:$r/t1"; check "cp DIR ID:/new: rc" 0 $?
check "the new path is the copy" "$(listing "$tmp/tree")" \
  "$("$sbx" exec "$id" -- "cd $r/t1 && find . -printf '%y %m %p %l\n' | sort")"
check "contents identical" "$(sha256sum <"$tmp/tree/sub/bin")" "$("$sbx" exec "$id" -- sha256sum </dev/null $r/t1/sub/bin | cut -c1-64)  -"
check "owned by the sandbox's user" root "$("$sbx" exec "$id" -- stat -c %U $r/t1/a.txt)"
"$sbx" cp "$tmp/tree" "$id:$r/t1"; check "cp DIR ID:/existing-dir: rc" 0 $?
check "lands inside, under its name" "$(listing "$tmp/tree")" \
  "$("$sbx" exec "$id" -- "cd $r/t1/tree && find . -printf '%y %m %p %l\n' | sort")"
"$sbx" cp "$id:$r/t1" "$tmp/back"; check "cp ID:/dir LOCAL-new: rc" 0 $?
check "out again: the same tree" "$(listing "$tmp/tree")" "$(cd "$tmp/back" && find . -path ./tree -prune -o -printf '%y %m %p %l\n' | sort)"
check "out again: the same bytes" "$(sha256sum <"$tmp/tree/sub/bin")" "$(sha256sum <"$tmp/back/sub/bin")"
mkdir "$tmp/into"; "$sbx" cp "$id:$r/t1/sub" "$tmp/into"; check "cp ID:/dir LOCAL-dir: rc" 0 $?
check "lands inside, under its name" "$(sha256sum <"$tmp/tree/sub/bin")" "$(sha256sum <"$tmp/into/sub/bin")"
"$sbx" cp "$id:$r/t1" - | tar -t >"$tmp/names"; check "cp ID:/dir -: a tar stream" 0 $?
check "named by the directory" 1 "$(grep -cx 't1/sub/bin' "$tmp/names")"
tar -c -C "$tmp/tree" . | "$sbx" cp - "$id:$r/t2"; check "cp - ID:/dir: from a tar stream" 0 $?
check "extracted there" hello "$("$sbx" exec "$id" -- cat $r/t2/a.txt)"
"$sbx" exec "$id" -- rm -rf "$r"
# a hostile sandbox (its `tar` replaced, first on its PATH) sends names outside the copied
# directory, an absolute one and one through a symlink: refused, nothing lands outside
cat >"$tmp/evil-tar" <<'EVIL'
#!/usr/bin/env python3
import io, sys, tarfile
out = tarfile.open(fileobj=sys.stdout.buffer, mode="w|")
def add(name, data=b"x", **kw):
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    for k, v in kw.items():
        setattr(ti, k, v)
    out.addfile(ti, io.BytesIO(data) if ti.isfile() else None)
add("d/ok.txt", b"fine")
add("d/lnk", b"", type=tarfile.SYMTYPE, linkname="/tmp")
add("d/lnk/escape-link.txt")
add("d/../escape-dotdot.txt")
add("/tmp/escape-abs.txt")
out.close()
EVIL
evil=$("$sbx" create -q --provider "$provider" --timeout 600 \
  -e PATH=/tmp/sbx-evil-bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
"$sbx" exec -i "$evil" -- 'mkdir -p /tmp/sbx-evil-bin /tmp/sbx-evil-src/d && cat >/tmp/sbx-evil-bin/tar && chmod +x /tmp/sbx-evil-bin/tar' <"$tmp/evil-tar"
mkdir "$tmp/safe"
"$sbx" cp "$evil:/tmp/sbx-evil-src/d" "$tmp/safe/x" 2>"$tmp/err"; check "a hostile tar: cp fails" 1 $?
check "and says what it refused" 1 "$(grep -c 'refused\|Path contains\|symlink' "$tmp/err" | awk '{print ($1>0)}')"
check "the harmless entry before it landed" fine "$(cat "$tmp/safe/x/ok.txt" 2>/dev/null)"
check "nothing written outside the destination" "" \
  "$(find "$tmp" /tmp -maxdepth 3 -name 'escape-*' 2>/dev/null)"
"$sbx" exec "$evil" -- rm -rf /tmp/sbx-evil-bin /tmp/sbx-evil-src
"$sbx" rm "$evil" >/dev/null

# ---- docker's flags: -p publishes, --cpus/-m limit, -i/-t/-c refused with a pointer ----
pub=$("$sbx" create -q --provider "$provider" --timeout 600 -p 18765:8080 -p 9000/tcp --cpus 0.5 -m 256m)
check "create -p -p --cpus -m" 0 $?
ep() { curl -s -H "OPEN-SANDBOX-API-KEY: $SBX_API_KEY" "$SBX_HOST/v1/sandboxes/$pub/endpoints/$1" |
       python3 -c 'import json,sys; print(json.load(sys.stdin).get("published",""))'; }
check "-p HOSTPORT:PORT: published at HOSTPORT" "127.0.0.1:18765" "$(ep 8080)"
check "-p PORT: published at a free port" 1 "$([[ $(ep 9000) =~ ^127\.0\.0\.1:[0-9]+$ ]] && echo 1)"
"$sbx" rm "$pub" >/dev/null
for flag in -i -t "-c 512"; do
  # shellcheck disable=SC2086
  "$sbx" create -q $flag --provider "$provider" 2>"$tmp/err"; rc=$?
  check "create $flag: refused (usage)" 2 "$rc"
  check "create $flag: says what to use" 1 "$(grep -c -e 'sbx exec -it' -e '--cpus' "$tmp/err")"
done
"$sbx" create -q -m 12x --provider "$provider" 2>/dev/null; check "create -m 12x: usage error" 2 $?
"$sbx" create -q -p 1.2.3.4:80:80 --provider "$provider" 2>/dev/null; check "create -p IP:..: usage error" 2 $?
if [[ $provider == native ]]; then
  check "run -i: stdin is the command's" piped "$(echo piped | "$sbx" run -i --rm -m 64m -- cat)"
  check "run -t: a terminal for the command (runtime/tty drives it)" "tty" \
    "$("$sbx" run -t -- sh -c 'test -t 0 && test -t 1 && echo tty' </dev/null | tr -d '\r')"
  "$sbx" run -d -- true 2>"$tmp/err"; check "run -d: refused" 2 $?
  check "run -d: says what to use" 1 "$(grep -c 'sbx create' "$tmp/err")"
fi

# ---- names ----
named=$("$sbx" create -q --provider "$provider" --timeout 600 --name web-1 -l team=blue)
check "create --name" 0 $?
check "exec by name" by-name "$("$sbx" exec web-1 -- echo by-name)"
check "inspect by name" "$named" "$("$sbx" inspect -f '{{.ID}}' web-1)"
check "ls shows the name (last, as docker ps)" web-1 "$("$sbx" ls | awk -v id="$named" '$1==id {print $NF}')"
"$sbx" create -q --provider "$provider" --name web-1 2>"$tmp/err"; check "a name in use: fails" 1 $?
check "naming the sandbox that has it" 1 "$(grep -c "in use by sandbox $named" "$tmp/err")"
check "the 409 is the server's" 1 "$(grep -c 'HTTP 409' "$tmp/err")"
"$sbx" create -q --provider "$provider" --name 'bad name' 2>/dev/null; check "a bad name: usage error" 2 $?
"$sbx" create -q --provider "$provider" --name 'x-' 2>/dev/null; check "a name ending in '-': usage error" 2 $?
# the name is the metadata label sbx/name: an SDK setting it through PATCH meets the same rule
code=$(curl -s -o /dev/null -w '%{http_code}' -X PATCH -H "OPEN-SANDBOX-API-KEY: $SBX_API_KEY" \
  -H 'Content-Type: application/json' -d '{"sbx/name":"web-1"}' "$SBX_HOST/v1/sandboxes/$id/metadata")
check "PATCH to a name in use: 409" 409 "$code"
code=$(curl -s -o /dev/null -w '%{http_code}' -X PATCH -H "OPEN-SANDBOX-API-KEY: $SBX_API_KEY" \
  -H 'Content-Type: application/json' -d '{"sbx/name":"plain"}' "$SBX_HOST/v1/sandboxes/$id/metadata")
check "PATCH to a free name: 200" 200 "$code"
check "and the name works" "$id" "$("$sbx" inspect -f '{{.ID}}' plain)"
"$sbx" rm web-1; check "rm by name" 0 $?
again=$("$sbx" create -q --provider "$provider" --timeout 600 --name web-1)
check "a removed sandbox's name is free again" 0 $?
"$sbx" rm "$again" >/dev/null

# ---- --format ----
check "ls --format template" "$id|plain|Running|$provider" \
  "$("$sbx" ls --format '{{.ID}}|{{.Name}}|{{.State}}|{{.Provider}}' | grep "^$id")"
check "ls --format table: a header" "NAME	STATE" "$("$sbx" ls --format 'table {{.Name}}\t{{.State}}' | head -1)"
check "ls --format json: JSON lines" "$id" "$("$sbx" ls --format json | python3 -c 'import json,sys; print(",".join(json.loads(l)["id"] for l in sys.stdin))')"
check "{{.Metadata.KEY}} and {{json .Metadata}}" 'plain {"sbx/name": "plain"}' \
  "$("$sbx" inspect -f '{{.Metadata.sbx/name}} {{json .Metadata}}' "$id" | python3 -c 'import json,sys; a,b=sys.stdin.read().split(" ",1); print(a, json.dumps(json.loads(b)))')"
check "inspect --format json: one line each" 1 "$("$sbx" inspect --format json "$id" | wc -l)"
"$sbx" ls --format '{{.Nope}}' 2>"$tmp/err"; check "an unknown field: usage error" 2 $?
check "naming the fields" 1 "$(grep -c '.ID .Name .State' "$tmp/err")"

"$sbx" rm "$id" >/dev/null
echo "$passes passed, $fails failed"
[[ $fails == 0 ]] || { tail -20 "$SBX_TEST_STATE/server.log"; exit 1; }
