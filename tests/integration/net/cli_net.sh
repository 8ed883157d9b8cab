#!/usr/bin/env bash
# `sbx net ls` and `sbx net gc` on a private state dir: a lease whose veth does not exist and
# that is older than a minute is released; a young one is kept (it may be attaching). Without
# --bridge, gc cleans every network of the state dir.
set -euo pipefail
sbx=$1
dir=$(mktemp -d /tmp/sbx-cli-net-XXXXXX)
trap 'rm -rf "$dir"' EXIT
br="sbxc$$"
leases="$dir/$br/leases"
ids="$dir/$br/ids"
mkdir -p "$leases" "$ids"
ln -s old-sandbox "$leases/10.199.0.7" && ln -s 10.199.0.7 "$ids/old-sandbox"
ln -s new-sandbox "$leases/10.199.0.8" && ln -s 10.199.0.8 "$ids/new-sandbox"
touch -h -d '2 hours ago' "$leases/10.199.0.7"
opts=(--bridge "$br" --subnet 10.199.0.0/16 --state-dir "$dir")

out=$("$sbx" net ls "${opts[@]}")
grep -q '^10.199.0.7 .*vsbx0ac70007 .*02:5b:0a:c7:00:07 .*old-sandbox$' <<<"$out"
grep -q '^10.199.0.8 .*new-sandbox$' <<<"$out"
# its leaf bridge: the first (addresses .2 .. .1001 with the default leaf size)
grep -Eq '^10.199.0.7 .* (sbxc[0-9]+|lsbx[0-9a-f]{6})\.1 +old-sandbox$' <<<"$out"

"$sbx" net gc "${opts[@]}" | grep -q 'released 1 stale lease$'
[[ ! -e "$leases/10.199.0.7" && ! -e "$ids/old-sandbox" ]]
[[ -L "$leases/10.199.0.8" && -L "$ids/new-sandbox" ]]

# without --bridge: every network of the state dir (its lease dirs; a dir without one is none)
br2="sbxd$$"
mkdir -p "$dir/$br2/leases" "$dir/$br2/ids" "$dir/not-a-network"
ln -s gone-sandbox "$dir/$br2/leases/10.198.0.9" && ln -s 10.198.0.9 "$dir/$br2/ids/gone-sandbox"
touch -h -d '2 hours ago' "$dir/$br2/leases/10.198.0.9" "$leases/10.199.0.8"
out=$("$sbx" net gc --state-dir "$dir")
grep -qx "$br: released 1 stale lease" <<<"$out"
grep -qx "$br2: released 1 stale lease" <<<"$out"
[[ $(wc -l <<<"$out") == 2 ]] # the host's networks are not looked for with another state dir
[[ ! -e "$leases/10.199.0.8" && ! -e "$dir/$br2/leases/10.198.0.9" && ! -e "$dir/$br2/ids/gone-sandbox" ]]
[[ ! -e "$dir/not-a-network/leases" ]]

if "$sbx" net gc --subnet 10.199.0.1/16 --state-dir "$dir" 2>"$dir/err"; then exit 1; fi
grep -q 'host bits' "$dir/err"
echo ok
