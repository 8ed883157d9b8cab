#!/usr/bin/env bash
# build.sh - sbx's container images, as `docker save` tars (for `docker load`, `podman load`,
# `skopeo copy docker-archive:...`, and `sbx image import`), built without pulling any image:
#
#   sbx-execd:VERSION  only the static /sbx-execd (what the kubernetes provider's init container
#                      runs as `/sbx-execd --install DEST`); no shell, no libc, no other file
#   sbx:VERSION        `sbx serve` on Debian bookworm: mmdebstrap's `essential` set plus only the
#                      shared libraries sbx-full links (found with ldd + dpkg -S on this host) and
#                      ca-certificates; /usr/bin/sbx, /usr/bin/sbx-full, /usr/lib/sbx/sbx-execd,
#                      /etc/sbx/sbx.conf (deploy/kubernetes/sbx.conf); user sbx (10001:10001),
#                      entrypoint `sbx serve --config /etc/sbx/sbx.conf`
#
#   deploy/images/build.sh [--bin-dir DIR] [-o OUTDIR] [--version V] [--prefix REGISTRY/]
#                          execd|server|all
#
# --bin-dir: a release build (default build/release; `make images` builds it): sbx, sbx-full and
# the static sbx-execd. A sanitizer build is refused (its sbx-full needs libasan). -o: where the
# tars go (default build/images: sbx-execd.tar, sbx.tar). --prefix names the images for a
# registry (e.g. registry.example.com/sbx/ gives registry.example.com/sbx/sbx:0.1.0).
#
# The server image needs root (mmdebstrap in root mode) and the host's apt sources (the host's
# apt cache is reused); the execd image needs neither. No other network access.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
bindir=$top/build/release
outdir=$top/build/images
prefix=
version=$(sed -n 's/^project(sbx VERSION \([0-9.]*\).*/\1/p' "$top/CMakeLists.txt")
what=
while [[ $# -gt 0 ]]; do
  case $1 in
    --bin-dir) bindir=$2; shift 2 ;;
    -o|--output) outdir=$2; shift 2 ;;
    --version) version=$2; shift 2 ;;
    --prefix) prefix=$2; shift 2 ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    execd|server|all) what=$1; shift ;;
    *) echo "build.sh: unknown argument \`$1\` (see --help)" >&2; exit 2 ;;
  esac
done
[[ -n $what ]] || { echo "build.sh: say what to build: execd, server or all (see --help)" >&2; exit 2; }
[[ -n $version ]] || { echo "build.sh: no version (--version)" >&2; exit 2; }
mkdir -p "$outdir"
work=$(mktemp -d /var/tmp/sbx-deploy-image.XXXXXX)
trap 'rm -rf "$work"' EXIT

die() { echo "build.sh: $*" >&2; exit 1; }

# A static executable has no program interpreter (PT_INTERP); the execd image has no libc.
is_static() { ! LC_ALL=C readelf -l "$1" 2>/dev/null | grep -q 'Requesting program interpreter'; }

find_execd() {
  local f
  for f in "$bindir/sbx-execd-static" "$bindir/sbx-execd"; do
    if [[ -x $f ]] && is_static "$f"; then echo "$f"; return; fi
  done
  die "no static sbx-execd in $bindir (build it: cmake --preset release && cmake --build build/release)"
}

# The file tree as a tar of root-owned files, the layer of a one-layer image.
tar_tree() {
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$1" -cf "$2" .
}

build_execd() {
  local execd tree=$work/execd
  execd=$(find_execd)
  mkdir -p "$tree"
  install -m 0755 "$execd" "$tree/sbx-execd"
  tar_tree "$tree" "$work/execd-rootfs.tar"
  python3 "$top/images/desktop/mkimage.py" --rootfs "$work/execd-rootfs.tar" \
    --tag "${prefix}sbx-execd:$version" --output "$outdir/sbx-execd.tar" \
    --cmd '["/sbx-execd", "--help"]' --title "sbx-execd" \
    --description "the static sbx-execd at /sbx-execd, for the kubernetes provider's init container" \
    --created-by "deploy/images/build.sh execd"
  echo "build.sh: wrote $outdir/sbx-execd.tar (${prefix}sbx-execd:$version)" >&2
}

# The Debian packages holding the shared libraries $1 links (the dynamic loader and libc are in
# every Debian root).
runtime_packages() {
  local lib pkgs=()
  while read -r lib; do
    [[ -n $lib ]] || continue
    lib=$(readlink -f "$lib")
    local pkg
    pkg=$(dpkg -S "$lib" 2>/dev/null | head -n1 | cut -d: -f1) ||
      true
    if [[ -z $pkg ]]; then # merged /usr: dpkg knows /lib/..., ldd says /usr/lib/... or back
      local alt=${lib#/usr}
      [[ $alt == "$lib" ]] && alt=/usr$lib
      pkg=$(dpkg -S "$alt" 2>/dev/null | head -n1 | cut -d: -f1) || true
    fi
    [[ -n $pkg ]] || die "no Debian package holds $lib (needed by $1)"
    pkgs+=("$pkg")
  done < <(ldd "$1" | awk '/=> \//{print $3} /^\t\/.*ld-linux/{print $1}')
  printf '%s\n' "${pkgs[@]}" | grep -v -x -e libc6 | sort -u
}

# shellcheck disable=SC2016 # the hooks' "$1" is mmdebstrap's root, expanded by its shell
build_server() {
  [[ $(id -u) -eq 0 ]] || die "the server image needs root (mmdebstrap in root mode)"
  command -v mmdebstrap >/dev/null || die "mmdebstrap is not installed (apt-get install mmdebstrap)"
  local full=$bindir/sbx-full execd
  [[ -x $full && -x $bindir/sbx ]] || die "no sbx/sbx-full in $bindir (a release build)"
  if ldd "$full" | grep -q -e libasan -e libubsan; then
    die "$full is a sanitizer build: use a release build (--bin-dir build/release)"
  fi
  is_static "$bindir/sbx" || die "$bindir/sbx is not static: use a release build"
  execd=$(find_execd)
  local pkgs
  mapfile -t pkgs < <(runtime_packages "$full")
  pkgs+=(ca-certificates)
  local tree=$work/server
  mkdir -p "$tree/usr/bin" "$tree/usr/lib/sbx" "$tree/etc/sbx"
  install -m 0755 "$bindir/sbx" "$bindir/sbx-full" "$tree/usr/bin/"
  install -m 0755 "$execd" "$tree/usr/lib/sbx/sbx-execd"
  install -m 0644 "$top/deploy/kubernetes/sbx.conf" "$tree/etc/sbx/sbx.conf"
  local sources=()
  if [[ -s /etc/apt/sources.list.d/debian.sources ]]; then
    sources=(/etc/apt/sources.list.d/debian.sources)
  elif [[ -s /etc/apt/sources.list ]]; then
    sources=(/etc/apt/sources.list)
  fi
  local cache=/var/cache/apt/archives
  echo "build.sh: debian bookworm (essential) + ${pkgs[*]}" >&2
  # The user is written into passwd/group directly: `essential` has no useradd (passwd).
  # merged /usr by mmdebstrap's hook (as debootstrap does it), not by the usrmerge package,
  # which would pull perl into the image.
  mmdebstrap --quiet --variant=essential --mode=root --format=tar \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --aptopt='APT::Install-Recommends "false"' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --include="$(IFS=,; echo "${pkgs[*]}")" \
    --setup-hook='mkdir -p "$1"/var/cache/apt/archives/' \
    --setup-hook="sync-in $cache/ /var/cache/apt/archives/" \
    --customize-hook="sync-out /var/cache/apt/archives/ $cache/" \
    --customize-hook="copy-in $tree/usr/bin/sbx $tree/usr/bin/sbx-full /usr/bin/" \
    --customize-hook="mkdir -p \"\$1\"/usr/lib/sbx \"\$1\"/etc/sbx" \
    --customize-hook="copy-in $tree/usr/lib/sbx/sbx-execd /usr/lib/sbx/" \
    --customize-hook="copy-in $tree/etc/sbx/sbx.conf /etc/sbx/" \
    --customize-hook='echo "sbx:x:10001:10001:sbx server:/var/lib/sbx:/usr/sbin/nologin" >> "$1"/etc/passwd' \
    --customize-hook='echo "sbx:x:10001:" >> "$1"/etc/group' \
    --customize-hook='echo "sbx:*:19000:0:99999:7:::" >> "$1"/etc/shadow' \
    --customize-hook='install -d -m 0700 -o 10001 -g 10001 "$1"/var/lib/sbx' \
    --customize-hook='chown -R 0:0 "$1"/usr/bin/sbx "$1"/usr/bin/sbx-full "$1"/usr/lib/sbx "$1"/etc/sbx' \
    --customize-hook='rm -rf "$1"/var/cache/apt/archives/*.deb "$1"/var/lib/apt/lists/*' \
    --customize-hook='rm -f "$1"/var/log/*.log "$1"/var/cache/ldconfig/aux-cache' \
    bookworm "$work/server-rootfs.tar" "${sources[@]}"
  python3 "$top/images/desktop/mkimage.py" --rootfs "$work/server-rootfs.tar" \
    --tag "${prefix}sbx:$version" --output "$outdir/sbx.tar" \
    --entrypoint '["/usr/bin/sbx", "serve"]' --cmd '["--config", "/etc/sbx/sbx.conf"]' \
    --user 10001:10001 --workdir /var/lib/sbx --title "sbx" \
    --description "sbx serve (OpenSandbox API) on Debian bookworm, for deploy/kubernetes" \
    --created-by "deploy/images/build.sh server (mmdebstrap)"
  echo "build.sh: wrote $outdir/sbx.tar (${prefix}sbx:$version)" >&2
}

case $what in
  execd) build_execd ;;
  server) build_server ;;
  all) build_execd; build_server ;;
esac
