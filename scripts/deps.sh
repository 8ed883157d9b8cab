#!/usr/bin/env bash
# Install the Debian packages sbx needs to build, run and test, if any are missing.
# Idempotent and silent when everything is already there. Needs root (or sudo) to install.
#   scripts/deps.sh            build + run + test packages
#   scripts/deps.sh --bench    also the benchmark tools
set -euo pipefail

pkgs=(
  # build
  cmake ninja-build pkg-config gcc make
  libjansson-dev libmicrohttpd-dev libcurl4-openssl-dev libsqlite3-dev libevent-dev
  libseccomp-dev libarchive-dev libzstd-dev libsodium-dev libconfig-dev
  libnftables-dev
  # test and CI gates
  libcmocka-dev clang clang-tidy clang-format libclang-rt-14-dev
  # runtime helpers used by tests (real peers, not mocks)
  iproute2 iptables procps psmisc curl python3
  # image store tests: a real registry, skopeo to fill it, a static busybox for the rootfs,
  # htpasswd for basic auth, getfattr for overlay xattrs, python3 for the fake token service
  docker-registry skopeo busybox-static apache2-utils attr zstd python3
  # runtime tests: `file` checks that static binaries are static
  file
)
if [[ "${1:-}" == "--bench" ]]; then
  pkgs+=(hyperfine wrk bubblewrap crun runc docker.io gnuplot-nox busybox-static python3 util-linux)
fi

missing=()
for p in "${pkgs[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "installed" ]] || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "deps: installing ${missing[*]}" >&2
sudo=""
[[ $(id -u) -eq 0 ]] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
if ! { $sudo apt-get update -qq && \
       $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
  cat "$log" >&2
  rm -f "$log"
  echo "deps: apt-get failed" >&2
  exit 1
fi
rm -f "$log"
echo "deps: done" >&2
