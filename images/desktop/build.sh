#!/usr/bin/env bash
# build.sh - the sbx desktop image: Debian bookworm with what a desktop sandbox runs (Xvnc,
# openbox, xterm, fonts, the accessibility bus, python3 for OSWorld's API and pyautogui code),
# as a `docker save` tar that both `docker load` and `sbx image import` read.
#
#   images/desktop/build.sh [-o OUT.tar] [-t NAME:TAG] [--chromium] [--ffmpeg]
#                           [--osworld [--password PW]]
#
# --osworld: the image OSWorld's tasks assume (docs/desktop-env.md): user `user` (uid 1000,
# sudo, password PW, default "password"), the desktop run as that user at 1920x1080, dconf
# behind gsettings, GNOME's schemas, gnome-terminal on Ctrl+Alt+T, PulseAudio, VLC, GIMP,
# LibreOffice and Thunderbird, each started once so their config files exist.
#
# Packages come from the host's apt sources only (mmdebstrap; the host's apt cache is reused
# when it holds them, so a machine that ran scripts/deps.sh downloads little or nothing). No
# other network access. sbx-execd is not in the image: every provider brings its own.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=sbx-desktop.tar
tag=sbx-desktop:latest
extra=()
osworld=0
password=password
while [[ $# -gt 0 ]]; do
  case $1 in
    -o|--output) out=$2; shift 2 ;;
    -t|--tag) tag=$2; shift 2 ;;
    --chromium) extra+=(chromium); shift ;;
    --ffmpeg) extra+=(ffmpeg); shift ;;
    --osworld) osworld=1; shift ;;
    --password) password=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build.sh: unknown argument \`$1\` (see --help)" >&2; exit 2 ;;
  esac
done
[[ $(id -u) -eq 0 ]] || { echo "build.sh: run as root (mmdebstrap in root mode)" >&2; exit 2; }
if ! command -v mmdebstrap >/dev/null; then
  echo "build.sh: installing mmdebstrap" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q mmdebstrap >/dev/null
fi

pkgs=(
  tigervnc-standalone-server openbox xterm fonts-dejavu-core x11-utils
  dbus-daemon dbus-bin at-spi2-core python3 ca-certificates procps
  "${extra[@]}"
)
hooks=(--customize-hook='useradd -m -s /bin/bash -u 1000 user --root "$1"')
mkargs=()
if ((osworld)); then
  [[ $password != *:* && $password != *$'\n'* ]] || { echo "build.sh: bad --password" >&2; exit 2; }
  pkgs+=(
    # the user's session: sudo, dconf behind gsettings, GNOME's schemas, a session bus
    sudo dconf-cli dconf-gsettings-backend dconf-service gsettings-desktop-schemas
    libglib2.0-bin dbus-user-session xdg-utils xdg-user-dirs
    # OSWorld's apps (Chrome and VS Code are not Debian packages: tasks needing them say so)
    gnome-terminal pulseaudio pulseaudio-utils vlc gimp thunderbird
    libreoffice-calc libreoffice-writer libreoffice-impress libreoffice-gtk3
    fonts-liberation2 python-is-python3 ffmpeg
  )
  tag=${tag/#sbx-desktop:latest/sbx-osworld:latest}
  [[ $out == sbx-desktop.tar ]] && out=sbx-osworld.tar
  export SBX_OSWORLD_PASSWORD=$password
  hooks=(--customize-hook="$here/osworld-setup.sh \"\$1\"")
  mkargs=(--env SBX_DESKTOP_USER=user --env SBX_DESKTOP_SIZE=1920x1080
          --title "sbx osworld"
          --description "sbx's desktop image for OSWorld tasks (images/desktop/build.sh --osworld)")
fi
work=$(mktemp -d /var/tmp/sbx-desktop-image.XXXXXX)
trap 'rm -rf "$work"' EXIT
cache=/var/cache/apt/archives
# the host's sources: deb822 (bookworm's default) or a classic sources.list; else Debian's mirror
sources=()
if [[ -s /etc/apt/sources.list.d/debian.sources ]]; then
  sources=(/etc/apt/sources.list.d/debian.sources)
elif [[ -s /etc/apt/sources.list ]]; then
  sources=(/etc/apt/sources.list)
fi
echo "build.sh: debian bookworm + ${pkgs[*]}" >&2
mmdebstrap --quiet --variant=minbase --mode=root --format=tar \
  --aptopt='APT::Install-Recommends "false"' --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
  --include="$(IFS=,; echo "${pkgs[*]}")" \
  --setup-hook='mkdir -p "$1"/var/cache/apt/archives/' \
  --setup-hook="sync-in $cache/ /var/cache/apt/archives/" \
  --customize-hook="sync-out /var/cache/apt/archives/ $cache/" \
  --customize-hook='rm -rf "$1"/var/cache/apt/archives/*.deb "$1"/var/lib/apt/lists/*' \
  "${hooks[@]}" \
  bookworm "$work/rootfs.tar" "${sources[@]}"
python3 "$here/mkimage.py" --rootfs "$work/rootfs.tar" --tag "$tag" --output "$out" "${mkargs[@]}"
echo "build.sh: wrote $out ($tag): docker load -i $out  |  sbx image import $out" >&2
