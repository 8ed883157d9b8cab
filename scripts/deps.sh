#!/usr/bin/env bash
# Install the Debian packages sbx needs to build, run and test, if any are missing.
# Idempotent and silent when everything is already there. Needs root (or sudo) to install.
#   scripts/deps.sh            build + run + test packages
#   scripts/deps.sh --bench    also the benchmark tools
#   scripts/deps.sh --deb      only what `make deb` needs: dpkg-dev and debian/control's
#                              Build-Depends (apt-get build-dep), nothing for the tests
set -euo pipefail

if [[ "${1:-}" == "--deb" ]]; then
  root=$(cd "$(dirname "$0")/.." && pwd)
  if command -v dpkg-checkbuilddeps >/dev/null &&
     (cd "$root" && dpkg-checkbuilddeps) >/dev/null 2>&1; then
    exit 0
  fi
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  echo "deps: installing dpkg-dev and the Build-Depends of debian/control" >&2
  log=$(mktemp)
  if ! { $sudo apt-get update -qq &&
         $sudo apt-get install -y -qq --no-install-recommends dpkg-dev &&
         $sudo apt-get build-dep -y -qq --no-install-recommends "$root"; } >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "deps: apt-get failed" >&2
    exit 1
  fi
  rm -f "$log"
  echo "deps: done" >&2
  exit 0
fi

pkgs=(
  # build
  cmake ninja-build pkg-config gcc make
  libjansson-dev libmicrohttpd-dev libcurl4-openssl-dev libsqlite3-dev libevent-dev
  libseccomp-dev libarchive-dev libzstd-dev libsodium-dev libconfig-dev
  libnftables-dev libc-ares-dev
  # the credential proxy's HTTPS interception (src/egress/tlsca.c, credtls.c)
  libssl-dev
  # the kubernetes provider's kubeconfig reader
  libyaml-dev
  # test and CI gates
  libcmocka-dev clang clang-tidy clang-format libclang-rt-14-dev
  # runtime helpers used by tests (real peers, not mocks)
  iproute2 iptables procps psmisc curl python3
  # a TLS certificate for the fake Daytona (the daytona provider's https paths)
  openssl
  # capped disk layers of native sandboxes (mkfs.ext4)
  e2fsprogs
  # execd code interpreting: a real Jupyter kernel (execd speaks ZMTP itself, no libzmq)
  python3-ipykernel
  # image store tests: a real registry, skopeo to fill it, a static busybox for the rootfs,
  # htpasswd for basic auth, getfattr for overlay xattrs, python3 for the fake token service
  docker-registry skopeo busybox-static apache2-utils attr zstd python3
  # runtime tests: `file` checks that static binaries are static
  file
  # zsh completion (completions/_sbx) is tested in a real zsh; man pages are rendered by groff
  zsh groff-base man-db
  # the Debian package (make deb, tests/integration/deb): dpkg-buildpackage + debhelper, a
  # Debian 12 root made by mmdebstrap to install it in, systemd-analyze to check the unit,
  # systemd-nspawn to boot that root and drive sbx.service with systemctl
  dpkg-dev debhelper systemd systemd-container
  # terminals: tmux drives `sbx shell` / `sbx exec -it` on a real terminal (client/shell-tmux);
  # nettle (libnettle.a: execd's WebSocket accept key) comes with the build's nettle-dev
  tmux nettle-dev
  # docker provider tests: a private dockerd and a private podman service (runc: podman's
  # runtime there, crun refuses hybrid cgroups)
  docker.io podman runc
  # desktop accessibility tree: libdbus (libdbus-1.a for the static link); its tests run Xvnc,
  # the a11y bus + at-spi2-registryd and Chromium, click with xdotool, set AT_SPI_BUS with
  # xprop, compare with pyatspi (OSWorld's way) and fake AT-SPI apps (python3-dbus, GLib)
  libdbus-1-dev dbus-bin tigervnc-standalone-server at-spi2-core chromium xdotool x11-utils
  python3-pyatspi python3-dbus python3-gi util-linux
  # ... and libatspi in C making the same calls, for the speed comparison
  libatspi2.0-dev
  # the desktop (src/desktop): xcb for X (screenshots over MIT-SHM, XTest input, XFixes cursor),
  # libpng + zlib and libjpeg-turbo to encode, x11proto-dev's keysym headers (the key names),
  # all with static archives for sbx-execd; the desktop's own programs: a window manager, a
  # terminal and fonts (the tests type into xterm and read its window)
  libxcb1-dev libxcb-shm0-dev libxcb-xtest0-dev libxcb-xfixes0-dev libxau-dev libxdmcp-dev
  x11proto-dev libpng-dev zlib1g-dev libturbojpeg0-dev
  openbox xterm fonts-dejavu-core
  # OSWorld's office metrics in sbx.desktop_env (compare_images: Pillow + numpy for SSIM;
  # compare_docx_files: python-docx; compare_table: openpyxl), imported only when a task uses
  # them; the tests sdk/python/metrics-office and sdk/python/desktop-env run them (/usr/bin/python3)
  python3-pil python3-numpy python3-docx python3-openpyxl
  # server/router-differential: h11 (a reference HTTP/1.1 parser, pure Python) reads the same
  # sandbox responses as the router and the two verdicts must agree (/usr/bin/python3)
  python3-h11
  # the fake Kubernetes API server (tests/integration/kubernetes): the official client's
  # generated models are its OpenAPI schema, and its test drives it with that client
  # (CoreV1Api, Watch, stream.portforward) to prove the wire protocol; no API server here
  python3-kubernetes
  # ffprobe checks the JPEG screenshots (and ffmpeg x11grab is the bench's OSWorld-way shot)
  ffmpeg
  # the live view: Debian's noVNC (served by sbx serve from /usr/share/novnc), nettle's SHA-1
  # and base64 for the WebSocket handshake
  novnc nettle-dev
  # the desktop image (images/desktop/build.sh) from Debian packages
  mmdebstrap
)
if [[ "${1:-}" == "--bench" ]]; then
  pkgs+=(hyperfine wrk bubblewrap crun gnuplot-nox busybox-static python3 util-linux)
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
# Installing must not start services (docker.io would start a system dockerd, which changes the
# host's iptables): without a policy-rc.d, one that refuses every start is in place meanwhile.
policy=/usr/sbin/policy-rc.d
own_policy=""
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null && $sudo chmod 755 "$policy"
  own_policy=1
fi
if ! { $sudo apt-get update -qq && \
       $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
  cat "$log" >&2
  rm -f "$log"
  [[ -n $own_policy ]] && $sudo rm -f "$policy"
  echo "deps: apt-get failed" >&2
  exit 1
fi
[[ -n $own_policy ]] && $sudo rm -f "$policy"
rm -f "$log"
echo "deps: done" >&2
