#!/usr/bin/env bash
# `make deb`: build the Debian package (dpkg-buildpackage + debhelper, debian/) into OUTDIR
# (default build/deb): sbx_VERSION_ARCH.deb and its .buildinfo/.changes, the log in build.log.
#   scripts/deb.sh [OUTDIR]
# The package is built from a copy of the tree (the files git tracks plus new ones it does not
# ignore; the whole tree less build/ outside a git checkout), so build/ and local leftovers
# never reach it and dpkg-buildpackage's outputs (written next to the source dir) land in
# OUTDIR. The object dir is kept in OUTDIR/obj between runs: a rebuild compiles what changed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/build/deb}
mkdir -p "$out"
out=$(cd "$out" && pwd)
"$root/scripts/deps.sh" --deb
version=$(dpkg-parsechangelog -l "$root/debian/changelog" -S Version)
src=$out/sbx-$version
keep=$out/obj
rm -rf "$src" "$out"/sbx_*.deb "$out"/sbx-dbgsym_*.deb "$out"/sbx_*.buildinfo "$out"/sbx_*.changes
mkdir -p "$src"
if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  (cd "$root" && git ls-files -z --cached --others --exclude-standard --deduplicate |
     while IFS= read -r -d '' f; do [[ -e $f || -L $f ]] && printf '%s\0' "$f"; done |
     tar --null -T - -cf -) | tar -C "$src" -xf -
else
  tar -C "$root" --exclude=./build -cf - . | tar -C "$src" -xf -
fi
if [[ -d $keep ]]; then
  mkdir -p "$src/build" && mv "$keep" "$src/build/deb-obj"
fi
echo "deb: building sbx $version (log: $out/build.log)" >&2
rc=0
(cd "$src" && dpkg-buildpackage -b -nc -us -uc -jauto) >"$out/build.log" 2>&1 || rc=$?
[[ -d $src/build/deb-obj ]] && mv "$src/build/deb-obj" "$keep"
if ((rc != 0)); then
  tail -n 40 "$out/build.log" >&2
  echo "deb: dpkg-buildpackage failed (exit $rc); the whole log: $out/build.log" >&2
  exit 1
fi
rm -rf "$src"
ls "$out"/sbx_"$version"_*.deb
