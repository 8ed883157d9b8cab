#!/usr/bin/env bash
# The CLI against a server behind TLS (an https:// SBX_HOST, as behind an ingress): a
# TLS-terminating proxy (tls_proxy.py, a certificate of a CA this test makes) in front of a
# real server. API calls and the WebSocket verbs (`sbx exec` in pipe mode, stdin and output in
# bulk, `sbx cp` of a directory, `sbx shell` in tmux, the Python SDK) over https:// and wss://; an untrusted
# certificate and a wrong host name refused, never downgraded.
#   cli_tls.sh SBX_BINARY
set -uo pipefail
sbx=$1
here=$(cd "$(dirname "$0")" && pwd)
command -v openssl >/dev/null || { echo "SKIP: openssl is not installed"; exit 77; }
. "$here/server_env.sh"
start_server "$sbx"
fails=0
ok() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

d=$SBX_TEST_STATE/tls
mkdir -p "$d"
# A CA, and a server certificate for "localhost" signed by it.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=sbx-test-ca \
  -keyout "$d/ca.key" -out "$d/ca.pem" 2>/dev/null || { echo "FAIL: CA"; exit 1; }
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=localhost \
  -keyout "$d/srv.key" -out "$d/srv.csr" 2>/dev/null &&
  printf 'subjectAltName=DNS:localhost\n' > "$d/ext" &&
  openssl x509 -req -in "$d/srv.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial -days 2 \
    -extfile "$d/ext" -out "$d/srv.pem" 2>/dev/null || { echo "FAIL: server certificate"; exit 1; }

backend=${SBX_HOST##*:}
python3 "$here/tls_proxy.py" "$d/srv.pem" "$d/srv.key" "$backend" "$d/port" &
proxy=$!
sock=$SBX_TEST_STATE/tmux.sock
T() { tmux -S "$sock" -f /dev/null "$@"; }
cleanup() { T kill-server 2>/dev/null; kill "$proxy" 2>/dev/null; wait "$proxy" 2>/dev/null; stop_server; }
trap cleanup EXIT
for _ in $(seq 100); do [[ -s $d/port ]] && break; sleep 0.1; done
port=$(cat "$d/port") || { echo "FAIL: the proxy did not start"; exit 1; }
export SBX_HOST=https://localhost:$port SBX_CA_CERT=$d/ca.pem

id=$("$sbx" create -q --provider native --timeout 600) || { echo "FAIL: create over https"; exit 1; }
ok "create over https"
"$sbx" ls -q | grep -qx "$id" && ok "ls over https" || fail "ls"

out=$("$sbx" exec "$id" -- echo hello-over-wss) && [[ $out == hello-over-wss ]] &&
  ok "exec's output over wss" || fail "exec: '$out'"
"$sbx" exec "$id" -- sh -c 'exit 7'
[[ $? -eq 7 ]] && ok "exit status over wss" || fail "exit status"
# Bulk both ways: 8 MiB through the sandbox's sha256sum, and 8 MiB of output back.
head -c 8388608 /dev/urandom > "$d/blob"
want=$(sha256sum < "$d/blob" | cut -d' ' -f1)
got=$("$sbx" exec -i "$id" -- sha256sum < "$d/blob" | cut -d' ' -f1)
[[ $got == "$want" ]] && ok "8 MiB of stdin over wss" || fail "stdin: $got != $want"
n=$("$sbx" exec "$id" -- sh -c 'head -c 8388608 /dev/zero' | wc -c)
[[ $n -eq 8388608 ]] && ok "8 MiB of output over wss" || fail "output: $n bytes"
mkdir -p "$d/tree/sub" && cp "$d/blob" "$d/tree/sub/blob" && echo x > "$d/tree/a"
if "$sbx" cp "$d/tree" "$id:/tmp/tree" && "$sbx" cp "$id:/tmp/tree" "$d/back" &&
   cmp -s "$d/tree/sub/blob" "$d/back/sub/blob" && cmp -s "$d/tree/a" "$d/back/a"; then
  ok "cp of a directory both ways over wss"
else
  fail "cp of a directory"
fi

if command -v tmux >/dev/null; then
  T new-session -d -x 100 -y 30 -s sh \
    "export SBX_HOST=$SBX_HOST SBX_API_KEY=$SBX_API_KEY SBX_CA_CERT=$SBX_CA_CERT;
     $sbx shell $id; echo sh-EXIT=\$?; sleep 600"
  T send-keys -t sh 'echo shell-$((6*7))' Enter
  seen=0
  for _ in $(seq 100); do
    T capture-pane -p -t sh | grep -q '^shell-42' && { seen=1; break; }
    sleep 0.1
  done
  [[ $seen == 1 ]] && ok "sbx shell over wss" || { T capture-pane -p -t sh; fail "sbx shell"; }
  T send-keys -t sh 'exit 3' Enter
  for _ in $(seq 50); do T capture-pane -p -t sh | grep -q 'sh-EXIT=' && break; sleep 0.1; done
  T capture-pane -p -t sh | grep -q '^sh-EXIT=3' && ok "the shell's exit code" || fail "shell exit"
fi

# The Python SDK over the same https:// and wss:// (its commands stream through the router).
sdk=$here/../../../sdk/python
got=$(PYTHONPATH=$sdk python3 -c '
import sys, sbx
sb = sbx.Client().connect(sys.argv[1])
print("".join(sb.commands.run("echo sdk-$((2*21))").stdout).strip())' "$id" 2>&1)
[[ $got == sdk-42 ]] && ok "the Python SDK over https" || fail "Python SDK: $got"
got=$(SBX_CA_CERT= PYTHONPATH=$sdk python3 -c 'import sbx; sbx.Client().list()' 2>&1)
[[ $got == *CERTIFICATE_VERIFY_FAILED* ]] && ok "the Python SDK refuses an untrusted certificate" ||
  fail "Python SDK, untrusted CA: $got"

# Never downgraded: a certificate of an unknown CA, and a name the certificate is not for.
err=$(SBX_CA_CERT= "$sbx" exec "$id" -- true 2>&1)
rc=$?
[[ $rc -ne 0 && $err == *ertificate* ]] && ok "an untrusted certificate is refused: $err" ||
  fail "untrusted CA: rc=$rc '$err'"
err=$(SBX_HOST=https://127.0.0.1:$port "$sbx" exec "$id" -- true 2>&1)
rc=$?
[[ $rc -ne 0 ]] && ok "a wrong host name is refused: $err" || fail "wrong name accepted"

"$sbx" rm "$id" >/dev/null || fail "rm over https"
[[ $fails -eq 0 ]] && echo "PASS" || { echo "$fails failure(s)"; exit 1; }
