#!/usr/bin/env bash
# `sbx snapshot` and `sbx create --snapshot` against a real server (native provider, a BusyBox
# image imported into its store): create (--wait, -q), ls (--sandbox, -q), inspect (a JSON
# array), export to an archive that docker-load and OCI tools read, import of it (on a second
# server: a snapshot moves between machines), restore with `create --snapshot`, rm; errors.
#   cli_snapshot.sh SBX_BINARY
set -uo pipefail
sbx=$1
here=$(cd "$(dirname "$0")" && pwd)
. "$here/server_env.sh"
[[ $(id -u) -eq 0 ]] || { echo "skip: needs root (native sandboxes)"; exit 77; }
tmp=$(mktemp -d)
python3 "$here/../../../scripts/busybox_image.py" "$tmp/bb.tar" sbx-test/busybox:1 || exit 1
start_server "$sbx"
trap 'rm -rf "$tmp"; stop_server' EXIT
"$sbx" image import --state-dir "$SBX_TEST_STATE" "$tmp/bb.tar" >/dev/null || exit 1
fails=0
check() { # description expected actual
  if [[ "$2" == "$3" ]]; then echo "ok: $1"
  else echo "FAIL: $1: want [$2] got [$3]"; fails=$((fails+1)); fi
}

id=$("$sbx" create -q --provider native --image sbx-test/busybox:1 --timeout 600 -- sleep 100000) ||
  { echo "skip: no native sandbox here"; exit 77; }
"$sbx" exec "$id" -- 'mkdir -p /root && echo from-cli > /root/f && rm /etc/base-file'
snap=$("$sbx" snapshot create --wait --name cli-snap "$id"); check "create --wait: rc" 0 $?
check "create prints the snapshot id" 36 "${#snap}"
check "ls -q lists it" "$snap" "$("$sbx" snapshot ls -q)"
check "ls --sandbox filters" "$snap" "$("$sbx" snapshot ls -q --sandbox "$id")"
check "ls: a header and a row naming its state and name" "Ready cli-snap" \
  "$("$sbx" snapshot ls | awk 'NR==2 {print $2, $5}')"
check "inspect: a JSON array" "Ready" \
  "$("$sbx" snapshot inspect "$snap" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["status"]["state"])')"

new=$("$sbx" create -q --snapshot "$snap" --timeout 600); check "create --snapshot: rc" 0 $?
check "the restored files" "from-cli|0" \
  "$("$sbx" exec "$new" -- 'cat /root/f; ls /etc/base-file 2>/dev/null | wc -l' | tr '\n' '|' | sed 's/|$//')"
check "its record names the snapshot" "$snap" \
  "$("$sbx" inspect "$new" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0].get("snapshotId"))')"
"$sbx" create -q --snapshot "$snap" --image sbx-test/busybox:1 >/dev/null 2>&1
check "an image and a snapshot: refused" 1 $?

"$sbx" snapshot export "$snap" -o "$tmp/snap.tar"; check "export: rc" 0 $?
check "export: an OCI layout and a docker-save archive" "index.json manifest.json oci-layout" \
  "$(tar tf "$tmp/snap.tar" | grep -v / | sort | tr '\n' ' ' | sed 's/ $//')"

# another server (another machine): import, restore
first_state=$SBX_TEST_STATE first_pid=$SBX_TEST_SERVER_PID first_host=$SBX_HOST
first_key=$SBX_API_KEY
start_server "$sbx"
trap 'rm -rf "$tmp"; stop_server; SBX_TEST_STATE=$first_state SBX_TEST_SERVER_PID=$first_pid stop_server' EXIT
moved=$("$sbx" snapshot import "$tmp/snap.tar"); check "import on another server: rc" 0 $?
check "the imported snapshot keeps its name" "cli-snap" "$("$sbx" snapshot ls | awk 'NR==2 {print $5}')"
there=$("$sbx" create -q --provider native --snapshot "$moved" --timeout 600)
check "restored on the other server" "from-cli" "$("$sbx" exec "$there" -- cat /root/f)"
"$sbx" rm "$there" >/dev/null
stop_server
SBX_TEST_STATE=$first_state SBX_TEST_SERVER_PID=$first_pid SBX_HOST=$first_host
SBX_API_KEY=$first_key
trap 'rm -rf "$tmp"; stop_server' EXIT

"$sbx" snapshot import "$tmp/nope.tar" 2>/dev/null; check "import of a missing file fails" 1 $?
printf 'junk' >"$tmp/junk.tar"
"$sbx" snapshot import "$tmp/junk.tar" 2>"$tmp/err"; check "import of junk fails" 1 $?
grep -qi "archive" "$tmp/err"; check "and says why ($(head -c 200 "$tmp/err"))" 0 $?
"$sbx" snapshot create no-such-sandbox 2>/dev/null; check "create of an unknown sandbox fails" 1 $?
"$sbx" snapshot frobnicate 2>/dev/null; check "an unknown subcommand: usage" 2 $?
"$sbx" snapshot rm "$snap" >/dev/null; check "rm: rc" 0 $?
check "rm: gone" "" "$("$sbx" snapshot ls -q --sandbox "$id")"
"$sbx" snapshot inspect "$snap" >/dev/null 2>&1; check "inspect of a removed snapshot fails" 1 $?
check "the restored sandbox outlives its snapshot" "from-cli" "$("$sbx" exec "$new" -- cat /root/f)"
"$sbx" rm "$id" "$new" >/dev/null

[[ $fails -eq 0 ]] && echo "all passed" || { echo "$fails failed"; exit 1; }
