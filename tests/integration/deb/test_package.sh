#!/usr/bin/env bash
# The Debian package, really built, installed and run (docs/install.md):
#  1. `make deb`'s script builds it into OUTDIR (an unchanged tree recompiles nothing);
#  2. its control fields, conffiles and files are what the package promises;
#  3. a clean Debian 12 root (mmdebstrap, variant apt + systemd and man-db, from the host's apt
#     sources; made once into OUTDIR/bookworm-root.tar and unpacked afresh on every run) gets
#     it with `apt-get install ./sbx_*.deb`, which fetches the dependencies from the mirror;
#  4. in that root: `systemd-analyze verify sbx.service` (systemd is not running: it loads the
#     unit offline and checks its commands and man: links), `man sbx-run`, `man 5 sbx.conf`;
#  5. the installed /usr/bin/sbx serve runs there with the default state dir (/var/lib/sbx)
#     and finds /usr/lib/sbx/sbx-execd by itself: /health answers, a native sandbox and a
#     process one are created and exec'd into through the installed CLI, a native sandbox
#     outlives a kill -9 of the server and answers after the restart;
#  6. the same root booted with systemd (systemd-nspawn --boot): sbx.service, enabled by the
#     package, starts at boot with the edited /etc/sbx/sbx.conf and makes /var/lib/sbx; a
#     sandbox outlives `systemctl restart sbx` and `systemctl stop sbx` + `start` (KillMode=
#     process), and, as a control, dies on a restart once a drop-in sets KillMode=control-group.
#     The process provider there: nspawn on a cgroup v1 host gives the container read-only
#     controller hierarchies, so native sandboxes cannot get their cgroups in it.
# Steps 4-5 run in a mount and pid namespace of their own (unshare): when they end, on success
# or failure, the kernel unmounts the root's /proc, /sys, /dev and kills what they started;
# step 6's container is powered off, else killed by PID.
# Native sandboxes get `network = "none"`: the host's sbx0 bridge belongs to the host's
# servers. Nothing is contacted but the apt mirror of the host's sources.
#   test_package.sh SOURCE_DIR OUTDIR
set -euo pipefail
src=$1
out=$2
mkdir -p "$out"
out=$(cd "$out" && pwd)
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root (mmdebstrap, chroot, mounts)"; exit 77; }
for tool in mmdebstrap unshare dpkg-buildpackage curl systemd-nspawn nsenter; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool is missing (scripts/deps.sh installs it)"; exit 1; }
done
fails=0
ok() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
t0=$SECONDS

# 1. the package
deb=$("$src/scripts/deb.sh" "$out") || { echo "FAIL: make deb's script failed"; exit 1; }
[[ -f $deb ]] || { echo "FAIL: no package at [$deb]"; exit 1; }
ok "built $(basename "$deb") ($((SECONDS - t0)) s)"

# 2. what it holds
want_version=$(dpkg-parsechangelog -l "$src/debian/changelog" -S Version)
project_version=$(sed -nE 's/^project\(sbx VERSION ([0-9.]+).*/\1/p' "$src/CMakeLists.txt")
[[ $want_version == "$project_version" ]] &&
  ok "debian/changelog's version is the project's ($project_version)" ||
  fail "debian/changelog says $want_version, CMakeLists.txt $project_version: add a changelog entry"
[[ $(dpkg-deb -f "$deb" Version) == "$want_version" ]] && ok "Version $want_version" || fail "Version"
depends=$(dpkg-deb -f "$deb" Depends)
for lib in libc6 libcurl4 libmicrohttpd12 libsqlite3-0 libnftables1 e2fsprogs; do
  [[ $depends == *"$lib"* ]] && ok "Depends: $lib" || fail "Depends lacks $lib: $depends"
done
[[ $(dpkg-deb -I "$deb" conffiles) == "/etc/sbx/sbx.conf" ]] && ok "conffile /etc/sbx/sbx.conf" ||
  fail "conffiles: $(dpkg-deb -I "$deb" conffiles 2>&1)"
files=$(dpkg-deb -c "$deb" | awk '{print $6}')
for f in ./usr/bin/sbx ./usr/bin/sbx-full ./usr/lib/sbx/sbx-execd ./lib/systemd/system/sbx.service \
         ./etc/sbx/sbx.conf ./usr/share/man/man1/sbx.1.gz ./usr/share/man/man1/sbx-run.1.gz \
         ./usr/share/man/man5/sbx.conf.5.gz ./usr/share/bash-completion/completions/sbx \
         ./usr/share/zsh/vendor-completions/_sbx; do
  grep -qxF -- "$f" <<<"$files" && ok "ships $f" || fail "does not ship $f"
done
grep -q '^\./usr/share/man/.*sbx-serve\.1\.gz$' <<<"$files" && ok "ships sbx-serve(1)" || fail "no sbx-serve(1)"

# 3. a clean Debian 12 root
base=$out/bookworm-root.tar
if [[ ! -s $base ]]; then
  sources=()
  if [[ -s /etc/apt/sources.list.d/debian.sources ]]; then
    sources=(/etc/apt/sources.list.d/debian.sources)
  elif [[ -s /etc/apt/sources.list ]]; then
    sources=(/etc/apt/sources.list)
  fi
  echo "making a Debian 12 root (mmdebstrap, once: $base)"
  mmdebstrap --quiet --variant=apt --mode=root --format=tar \
    --aptopt='APT::Install-Recommends "false"' --include=systemd,man-db \
    --setup-hook='mkdir -p "$1"/var/cache/apt/archives/' \
    --setup-hook='sync-in /var/cache/apt/archives/ /var/cache/apt/archives/' \
    --customize-hook='rm -f "$1"/var/cache/apt/archives/*.deb' \
    bookworm "$base.tmp" "${sources[@]}" || { rm -f "$base.tmp"; echo "FAIL: mmdebstrap"; exit 1; }
  mv "$base.tmp" "$base"
  ok "made the Debian 12 root ($((SECONDS - t0)) s)"
fi
root=$(mktemp -d /var/tmp/sbx-deb-root.XXXXXX)
nspawn=""
cgname=sbx-deb-test-$$   # the sandboxes' cgroups: below this test's own, in this dir
# nspawn --keep-unit leaves its payload/supervisor cgroups (empty) where this test runs
nspawn_cgroups=()
for h in /sys/fs/cgroup/systemd /sys/fs/cgroup/unified /sys/fs/cgroup; do
  own=$(awk -F: -v n="$([[ $h == */systemd ]] && echo name=systemd)" '$2 == n {print $3; exit}' /proc/self/cgroup)
  for d in payload supervisor; do
    [[ -d $h$own && ! -e ${h}${own%/}/$d ]] && nspawn_cgroups+=("${h}${own%/}/$d")
  done
done
leader=""
cleanup() {
  set +e
  if [[ -n $nspawn ]] && kill -0 "$nspawn" 2>/dev/null; then
    # the container's init first (nspawn's child, so its pid is still its own while nspawn
    # runs): its pid namespace goes with it, whatever nspawn does
    [[ -n $leader ]] && kill -KILL "$leader" 2>/dev/null
    kill -TERM "$nspawn" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$nspawn" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$nspawn" 2>/dev/null
    wait "$nspawn" 2>/dev/null
  fi
  # nspawn's cgroups, and the sandboxes' should a server have died before `sbx gc --all`
  # removed them (and their parent dir, which stays like the server's `sbx`); a cgroup whose
  # last task is still being reaped refuses rmdir for a moment
  local dirs=("${nspawn_cgroups[@]}") left
  mapfile -t -O "${#dirs[@]}" dirs < <(find /sys/fs/cgroup -type d -name "$cgname" -prune 2>/dev/null)
  for _ in $(seq 25); do
    left=0
    for d in "${dirs[@]}"; do
      [[ -d $d ]] || continue
      find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
      [[ -d $d ]] && left=1
    done
    ((left)) || break
    sleep 0.2
  done
  rm -rf --one-file-system "$root" 2>/dev/null || { sleep 1; rm -rf --one-file-system "$root"; }
}
trap cleanup EXIT
tar -C "$root" -xf "$base"
cp "$deb" "$root/tmp/"
cp -L /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
# the host's package lists (the root has the same sources): no `apt-get update` unless stale
cp -a /var/lib/apt/lists/. "$root/var/lib/apt/lists/" 2>/dev/null || true
# no service starts from maintainer scripts in the root (there is no systemd running anyway)
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d" && chmod 755 "$root/usr/sbin/policy-rc.d"
mkdir -p "$out/apt-archives/partial"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$root/tmp/test.conf" <<CONF
server = { listen = "127.0.0.1:$port"; };
providers = {
  supported = ["native", "process"];
  default = "native";
  native = { network = "none"; netns_pool = 0; total_disk = "0"; cgroup_parent = "$cgname"; };
};
CONF

# 4 + 5 run inside the namespaces: the script below, with the root as $1
cat >"$root/tmp/inner.sh" <<'INNER'
set -uo pipefail
root=$1 archives=$2 deb=/tmp/$3 port=$4
fails=0
ok() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8 "$@"; }
mount --bind "$root" "$root"          # a mount point: the sandboxes' pivot_root needs one
mount -t proc proc "$root/proc"       # this pid namespace's
mount --rbind /sys "$root/sys"        # cgroups
mount --rbind /dev "$root/dev"
mount -t tmpfs tmpfs "$root/run"
mount --bind "$archives" "$root/var/cache/apt/archives"   # downloaded debs, kept between runs

if in_root apt-get install -y -q --no-install-recommends "$deb" >"$root/tmp/apt.log" 2>&1 ||
   { in_root apt-get update -q && in_root apt-get install -y -q --no-install-recommends "$deb"; } \
     >>"$root/tmp/apt.log" 2>&1; then
  ok "apt-get install ./$(basename "$deb") in a clean Debian 12 root"
else
  cat "$root/tmp/apt.log"; fail "apt-get install"; exit 1
fi
[[ $(in_root dpkg-query -W -f='${Status}' sbx) == "install ok installed" ]] && ok "dpkg: installed" ||
  fail "dpkg status"
in_root systemctl is-enabled sbx.service >/dev/null 2>&1 && ok "sbx.service is enabled" ||
  fail "sbx.service is not enabled after install"
if out=$(in_root systemd-analyze verify sbx.service 2>&1); then
  ok "systemd-analyze verify sbx.service${out:+ ($out)}"
else
  fail "systemd-analyze verify sbx.service: $out"
fi
# ... and that check is not vacuous here: a broken copy of the unit fails it
sed -e 's|^ExecStart=/usr/bin/sbx|ExecStart=/usr/bin/sbx-missing|' -e 's|^KillMode=.*|KillMode=bogus|' \
  "$root/lib/systemd/system/sbx.service" >"$root/etc/systemd/system/sbx-broken.service"
if in_root systemd-analyze verify sbx-broken.service >/dev/null 2>&1; then
  fail "systemd-analyze verify passes a unit with a missing ExecStart binary"
else
  ok "systemd-analyze verify fails a broken copy of the unit"
fi
rm -f "$root/etc/systemd/system/sbx-broken.service"
unit=$(cat "$root/lib/systemd/system/sbx.service")
for want in "Delegate=yes" "KillMode=process" "Restart=on-failure" "StateDirectory=sbx" \
            "ExecStart=/usr/bin/sbx serve --config /etc/sbx/sbx.conf"; do
  grep -qxF "$want" <<<"$unit" && ok "unit: $want" || fail "unit lacks $want"
done
page=$(in_root man -P cat sbx-run 2>&1)
[[ $page == *"Run CMD in a fresh sandbox"* && $page == *"--cgroup-parent"* ]] && ok "man sbx-run" ||
  fail "man sbx-run: $page"
page=$(in_root man -P cat 5 sbx.conf 2>&1)
[[ $page == *"max_connections_per_client"* ]] && ok "man 5 sbx.conf" || fail "man 5 sbx.conf: $page"
[[ -f $root/usr/share/zsh/vendor-completions/_sbx && -f $root/usr/share/bash-completion/completions/sbx ]] &&
  ok "completions installed" || fail "completions"
# the shipped config as it is parses: the server gets past it to the listen address (checked
# next, before anything is created)
got=$(in_root sbx serve --config /etc/sbx/sbx.conf --listen not-an-address 2>&1)
[[ $got == *"listen address"* && $got != *"config"* ]] && ok "the shipped /etc/sbx/sbx.conf parses" ||
  fail "the shipped /etc/sbx/sbx.conf: $got"

serve() {
  in_root sbx serve --config /tmp/test.conf >>"$root/tmp/serve.log" 2>&1 &
  server=$!
  for _ in $(seq 150); do
    curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1 && return 0
    kill -0 "$server" 2>/dev/null || break
    sleep 0.1
  done
  return 1
}
if serve; then
  ok "the installed sbx serve answers /health: $(curl -fsS "http://127.0.0.1:$port/health")"
else
  cat "$root/tmp/serve.log"; fail "sbx serve did not answer /health"; exit 1
fi
[[ -s $root/var/lib/sbx/api-key && $(stat -c %a "$root/var/lib/sbx/api-key") == 600 ]] &&
  ok "state in /var/lib/sbx (api-key 0600)" || fail "no /var/lib/sbx/api-key"
cli() { in_root env SBX_HOST="http://127.0.0.1:$port" sbx "$@"; }
for provider in native process; do
  if id=$(cli create -q --provider "$provider" 2>&1) && [[ $id =~ ^[0-9a-f-]{36}$ ]]; then
    ok "$provider: created $id"
    got=$(cli exec "$id" -- 'echo hello from $(cat /etc/debian_version | cut -d. -f1)' 2>&1)
    [[ $got == "hello from 12" ]] && ok "$provider: exec in it: $got" || fail "$provider: exec: $got"
    eval "id_$provider=$id"
  else
    fail "$provider: create: $id"; tail -20 "$root/tmp/serve.log"
  fi
done
if [[ -n ${id_native:-} ]]; then
  kill -9 "$server"; wait "$server" 2>/dev/null
  if serve; then
    state=$(cli inspect "$id_native" 2>&1 | grep -o '"state": *"[A-Za-z]*"' | head -1)
    got=$(cli exec "$id_native" -- 'echo still here' 2>&1)
    [[ $got == "still here" ]] && ok "native: the sandbox outlived kill -9 of the server ($state)" ||
      fail "native: after the restart: $got ($state)"
  else
    fail "the server did not start again"; tail -20 "$root/tmp/serve.log"
  fi
  cli rm "$id_native" "${id_process:-}" >/dev/null 2>&1 && ok "rm" || fail "rm"
fi
kill "$server" 2>/dev/null; wait "$server" 2>/dev/null
in_root sbx gc --all >/dev/null 2>&1
exit $((fails > 0))
INNER
echo "installing and running it in the root ($((SECONDS - t0)) s so far)"
unshare --mount --pid --fork --propagation private \
  bash "$root/tmp/inner.sh" "$root" "$out/apt-archives" "$(basename "$deb")" "$port" || fails=$((fails + 1))

# 6. the root booted with systemd: the unit as an operator gets it (checks that fail are
# counted, not fatal, from here on)
set +e
rm -f "$root/usr/sbin/policy-rc.d"
rm -rf "$root/var/lib/sbx" "$root/tmp/"*.sh
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$root/etc/sbx/sbx.conf" <<CONF
server = { listen = "127.0.0.1:$port"; };
providers = { supported = ["process"]; default = "process"; };
CONF
echo "booting the root with systemd ($((SECONDS - t0)) s so far)"
systemd-nspawn -D "$root" --boot --register=no --keep-unit --quiet --console=passive \
  --machine="sbx-deb-$$" >"$out/nspawn.log" 2>&1 </dev/null &
nspawn=$!
leader=""
for _ in $(seq 100); do
  leader=$(pgrep -P "$nspawn" 2>/dev/null | head -1)
  [[ -n $leader ]] && break
  sleep 0.1
done
in_ct() { nsenter -t "$leader" -a /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 "$@"; }
ct_cli() { in_ct env SBX_HOST="http://127.0.0.1:$port" sbx "$@"; }
healthy() { # wait until the server answers
  for _ in $(seq 150); do
    curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  return 1
}
if [[ -n $leader ]] && healthy; then
  ok "systemd started sbx.service at boot: /health answers ($((SECONDS - t0)) s)"
  [[ $(in_ct systemctl is-active sbx.service) == active ]] && ok "systemctl is-active sbx: active" ||
    fail "sbx.service is not active"
  [[ $(stat -c %a "$root/var/lib/sbx") == 700 ]] && ok "StateDirectory made /var/lib/sbx 0700" ||
    fail "/var/lib/sbx mode $(stat -c %a "$root/var/lib/sbx" 2>&1)"
  id=$(ct_cli create -q 2>&1)
  got=$(ct_cli exec "$id" -- 'echo in $(cut -d: -f3 /proc/self/cgroup | grep -m1 sbx)' 2>&1)
  [[ $got == "in /system.slice/sbx.service" ]] && ok "a sandbox of the service: $got" ||
    fail "create+exec under systemd: $id $got"
  pid1=$(in_ct systemctl show -P MainPID sbx.service)
  in_ct systemctl restart sbx.service
  healthy || fail "no /health after systemctl restart sbx"
  pid2=$(in_ct systemctl show -P MainPID sbx.service)
  got=$(ct_cli exec "$id" -- 'echo still here' 2>&1)
  [[ $pid1 != "$pid2" && $got == "still here" ]] &&
    ok "the sandbox outlived systemctl restart sbx (server $pid1 -> $pid2)" ||
    fail "after systemctl restart sbx (server $pid1 -> $pid2): $got"
  in_ct systemctl stop sbx.service
  pgrep -f "sbx-execd.*$id" >/dev/null && ok "systemctl stop sbx leaves the sandbox running" ||
    fail "systemctl stop sbx killed the sandbox"
  in_ct systemctl start sbx.service
  healthy && got=$(ct_cli exec "$id" -- 'echo back' 2>&1)
  [[ ${got:-} == back ]] && ok "systemctl start sbx re-adopts it" || fail "after stop+start: ${got:-}"
  # the control: with systemd's default KillMode the same restart kills the sandbox
  mkdir -p "$root/etc/systemd/system/sbx.service.d"
  printf '[Service]\nKillMode=control-group\n' >"$root/etc/systemd/system/sbx.service.d/test.conf"
  in_ct systemctl daemon-reload
  mode=$(in_ct systemctl show -P KillMode sbx.service)
  id=$(ct_cli create -q 2>&1)
  in_ct systemctl restart sbx.service
  healthy
  got=$(ct_cli exec "$id" -- 'echo still here' 2>&1)
  [[ $mode == control-group && $got != "still here" ]] &&
    ok "control: with KillMode=control-group a restart kills it" ||
    fail "control (KillMode=$mode): the sandbox outlived the restart, so the check above proves nothing"
  in_ct systemctl poweroff 2>/dev/null
  for _ in $(seq 100); do kill -0 "$nspawn" 2>/dev/null || break; sleep 0.2; done
  kill -0 "$nspawn" 2>/dev/null && fail "the container did not power off" || ok "powered off"
else
  fail "sbx.service did not answer after boot"
  [[ -n $leader ]] && in_ct journalctl -u sbx.service --no-pager | tail -20
  tail -20 "$out/nspawn.log"
fi
echo "$((SECONDS - t0)) s"
((fails == 0)) && echo "deb/package: all passed" || echo "deb/package: $fails failed"
exit $((fails > 0))
