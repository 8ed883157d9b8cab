#!/usr/bin/env bash
# sbx image pull from a registry with htpasswd (HTTP Basic) auth: a clear permission error
# without or with wrong credentials, success with them (environment and --password-stdin).
SBX=$1 PROBE=$2
source "$(dirname "$0")/lib.sh"
need htpasswd

build_layers
m_bb=$(write_image "$T/oci" amd64 "$T/layer1.tar.gz" "$T/layer2.tar.gz")
write_layout "$T/oci" 1 "$m_bb"
htpasswd -Bbc "$T/htpasswd" alice 's3cret pass' 2>/dev/null
start_registry authreg "auth:
  htpasswd:
    realm: sbx-test
    path: $T/htpasswd"
R=127.0.0.1:$REG_PORT
[[ $(curl -s -o /dev/null -w '%{http_code}' "http://$R/v2/") == 401 ]] || die "registry has no auth"
push --dest-creds 'alice:s3cret pass' "oci:$T/oci:1" "docker://$R/private/bb:1"

echo "== no credentials"
if sbx pull "$R/private/bb:1" 2> "$T/err"; then die "pulled without credentials"; fi
grep -q "requires authentication" "$T/err" || die "error: $(cat "$T/err")"

echo "== wrong password"
if SBX_REGISTRY_USERNAME=alice SBX_REGISTRY_PASSWORD=wrong sbx pull "$R/private/bb:1" \
    2> "$T/err"; then die "pulled with a wrong password"; fi
grep -q "denied access" "$T/err" || die "error: $(cat "$T/err")"

echo "== credentials from the environment"
out=$(SBX_REGISTRY_USERNAME=alice SBX_REGISTRY_PASSWORD='s3cret pass' sbx pull "$R/private/bb:1")
[[ $out == "sha256:$m_bb" ]] || die "pull with credentials: $out"

echo "== --password-stdin"
rm -rf "$T/state"
out=$(echo 's3cret pass' | sbx pull --username alice --password-stdin "$R/private/bb:1")
[[ $out == "sha256:$m_bb" ]] || die "pull with --password-stdin: $out"
"$PROBE" "$T/state/images" "$R/private/bb:1" | grep -cx "digest=sha256:$m_bb" >/dev/null || die "resolve"

echo "PASS"
