#!/usr/bin/env bash
# The Bearer token flow against a FAKE token service (fake_token.py) that fronts a real
# docker-registry: anonymous tokens, tokens for basic credentials, the scope and service from
# the challenge passed back, and a clear permission error when the token service says no.
SBX=$1 PROBE=$2
source "$(dirname "$0")/lib.sh"
need python3

build_layers
m_bb=$(write_image "$T/oci" amd64 "$T/layer1.tar.gz" "$T/layer2.tar.gz")
write_layout "$T/oci" 1 "$m_bb"
start_registry reg
push "oci:$T/oci:1" "docker://127.0.0.1:$REG_PORT/public/bb:1"
push "oci:$T/oci:1" "docker://127.0.0.1:$REG_PORT/private/bb:1"

FP=$(free_port)
python3 "$(dirname "$0")/fake_token.py" "$FP" "http://127.0.0.1:$REG_PORT" bob hunter2 \
    "$T/token.log" &
PIDS+=($!)
for _ in $(seq 300); do
    [[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$FP/v2/public/bb/tags/list") == 401 ]] && break
    sleep 0.1
done
R=127.0.0.1:$FP

echo "== anonymous token"
[[ $(sbx pull "$R/public/bb:1") == "sha256:$m_bb" ]] || die "anonymous bearer pull"
grep -q "token scope=repository:public/bb:pull service=fake-registry auth=no" "$T/token.log" ||
    die "token request: $(cat "$T/token.log")"

echo "== token service refuses anonymous access to private/"
if sbx pull "$R/private/bb:1" 2> "$T/err"; then die "private pulled anonymously"; fi
grep -q "refused anonymous access" "$T/err" || die "error: $(cat "$T/err")"

echo "== wrong credentials"
if SBX_REGISTRY_USERNAME=bob SBX_REGISTRY_PASSWORD=nope sbx pull "$R/private/bb:1" 2> "$T/err"
then die "private pulled with a wrong password"; fi
grep -q "refused the credentials" "$T/err" || die "error: $(cat "$T/err")"

echo "== token for credentials"
rm -rf "$T/state"
out=$(SBX_REGISTRY_USERNAME=bob SBX_REGISTRY_PASSWORD=hunter2 sbx pull "$R/private/bb:1")
[[ $out == "sha256:$m_bb" ]] || die "bearer pull with credentials: $out"
grep -q "token scope=repository:private/bb:pull service=fake-registry auth=yes" "$T/token.log" ||
    die "token request: $(cat "$T/token.log")"
"$PROBE" "$T/state/images" "$R/private/bb:1" | grep -cx "digest=sha256:$m_bb" >/dev/null || die "resolve"

echo "PASS"
