#!/usr/bin/env bash
# `sbx secret` end to end: values from stdin or --from-env only, encrypted on disk, never
# printed by ls, clear errors.
set -uo pipefail
sbx=$1
state=$(mktemp -d /tmp/sbx-secret-cli-XXXXXX)
trap 'rm -rf "$state"' EXIT
fails=0 passes=0
check() { if [[ "$2" == "$3" ]]; then passes=$((passes+1)); else echo "FAIL: $1: want [$2] got [$3]"; fails=$((fails+1)); fi; }

printf 'tok-VALUE-123\n' | "$sbx" secret set DAYTONA_API_KEY --state-dir "$state"; check "set from stdin" 0 $?
MY_ORG=org-VALUE-456 "$sbx" secret set DAYTONA_ORGANIZATION_ID --from-env MY_ORG --state-dir "$state"
check "set from env" 0 $?
"$sbx" secret set X --from-env NOT_SET_ANYWHERE --state-dir "$state" 2>/dev/null; check "unset env var fails" 1 $?
out=$("$sbx" secret ls --state-dir "$state")
check "ls lists both names" 2 "$(grep -c -E '^(DAYTONA_API_KEY|DAYTONA_ORGANIZATION_ID) ' <<<"$out")"
check "ls never shows values" 0 "$(grep -c VALUE <<<"$out")"
check "ls --json" DAYTONA_API_KEY "$("$sbx" secret ls --json --state-dir "$state" | head -1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["name"])')"
check "no plaintext on disk" 0 "$(grep -r -c VALUE "$state" | awk -F: '{s+=$2} END {print s+0}')"
check "files are 0600" 600 "$(stat -c %a "$state/secrets/DAYTONA_API_KEY.secret")"
check "master key is 0600" 600 "$(stat -c %a "$state/secrets/master.key")"
"$sbx" secret set 'bad/name' --state-dir "$state" </dev/null 2>/dev/null; check "bad name refused" 1 $?
"$sbx" secret rm DAYTONA_API_KEY --state-dir "$state"; check "rm" 0 $?
err=$("$sbx" secret rm DAYTONA_API_KEY --state-dir "$state" 2>&1); check "rm twice fails" 1 $?
check "rm error names the secret" 1 "$(grep -c DAYTONA_API_KEY <<<"$err")"
"$sbx" secret frob --state-dir "$state" 2>/dev/null; check "unknown subcommand is a usage error" 2 $?
"$sbx" secret set --state-dir "$state" </dev/null 2>/dev/null; check "set without a name is a usage error" 2 $?
echo "$passes passed, $fails failed"
[[ $fails -eq 0 ]]
