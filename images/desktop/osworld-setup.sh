#!/usr/bin/env bash
# osworld-setup.sh ROOTFS - build.sh --osworld's customize hook: make ROOTFS the machine
# OSWorld's tasks assume (its Ubuntu VM, as far as Debian packages go). Runs on the build host
# as root, with ROOTFS's /proc, /sys and /dev mounted by mmdebstrap; the password comes in
# SBX_OSWORLD_PASSWORD (never on a command line).
set -euo pipefail
root=$1
pw=${SBX_OSWORLD_PASSWORD:?}
inroot() { chroot "$root" "$@"; }

# the user: uid 1000, in sudo (Debian's sudoers lets %sudo do anything with its password),
# audio and video like a desktop login
inroot useradd -m -s /bin/bash -u 1000 -G sudo,audio,video user
printf 'user:%s\n' "$pw" | inroot chpasswd
for d in Desktop Documents Downloads Music Pictures Public Templates Videos; do
  install -d -o 1000 -g 1000 "$root/home/user/$d"
done
# the D-Bus machine id programs of a session read (one per image, as in a VM snapshot)
inroot dbus-uuidgen --ensure=/etc/machine-id

# Ctrl+Alt+T opens gnome-terminal, as on Ubuntu's desktop (openbox's system-wide keys)
rc=$root/etc/xdg/openbox/rc.xml
grep -q 'C-A-t' "$rc" || sed -i 's|<keyboard>|<keyboard>\n    <keybind key="C-A-t"><action name="Execute"><command>gnome-terminal</command></action></keybind>|' "$rc"
grep -q 'C-A-t' "$rc"

# Each app started once as the user, headless, so its config files exist as after a first run
# in OSWorld's VM (tasks edit and evaluators read them). Bounded: a hang fails the build.
as_user() {
  inroot runuser -u user -- env -i HOME=/home/user USER=user LOGNAME=user LANG=C.UTF-8 \
    PATH=/usr/local/bin:/usr/bin:/bin timeout 180 "$@"
}
as_user libreoffice --headless --terminate_after_init
test -e "$root/home/user/.config/libreoffice/4/user/registrymodifications.xcu"
as_user gimp-console -i -d -f -b '(gimp-quit 0)' >/dev/null
test -d "$root/home/user/.config/GIMP"
as_user cvlc -I dummy --reset-config --save-config vlc://quit >/dev/null 2>&1 || true
test -e "$root/home/user/.config/vlc/vlcrc"
as_user thunderbird --headless -CreateProfile default >/dev/null 2>&1
test -e "$root/home/user/.thunderbird/profiles.ini"
# what the first runs left that a fresh session must not inherit
rm -rf "$root/home/user/.cache" "$root/tmp/"* "$root/tmp/".[!.]* 2>/dev/null || true

# sudo: sandboxes run with no_new_privs, so the setuid sudo cannot raise anyone; this one asks
# the sandbox's execd, which checks the password the same way (src/execd/sudo.c). First on
# PATH; the real one stays in /usr/bin for anything that calls it by its full path.
cat > "$root/usr/local/bin/sudo" <<'SH'
#!/bin/sh
# sbx: sudo through the sandbox's execd (no setuid in a sandbox: src/execd/sudo.c)
c=/tmp/.sbx-desktop/python/sbx_sudo.py
[ -r "$c" ] && exec /usr/bin/python3 -S "$c" "$@"
exec /usr/bin/sudo "$@"
SH
chmod 755 "$root/usr/local/bin/sudo"
