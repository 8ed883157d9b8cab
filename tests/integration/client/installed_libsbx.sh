#!/usr/bin/env bash
# libsbx as another project uses it: `cmake --install` (component libsbx) into a fresh
# prefix, a program built ONLY with `pkg-config --cflags --libs sbx` (PKG_CONFIG_PATH to that
# prefix; nothing from the source or build tree), run against a real `sbx serve`.
#   installed_libsbx.sh BUILD_DIR SBX_BINARY PROVIDER [EXTRA_CFLAGS]
# EXTRA_CFLAGS: the build's sanitizer flags (an ASan libsbx needs an ASan program).
set -uo pipefail
build=$1 sbx=$2 provider=$3 extra=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/server_env.sh"
[[ $(id -u) -eq 0 || $provider == process ]] || { echo "skip: needs root"; exit 77; }
command -v pkg-config >/dev/null || { echo "skip: no pkg-config"; exit 77; }
prefix=$(mktemp -d /tmp/sbx-libsbx-prefix-XXXXXX)
trap 'rm -rf "$prefix"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cmake --install "$build" --prefix "$prefix" --component libsbx >"$prefix/install.log" ||
  { cat "$prefix/install.log"; fail "cmake --install"; }
pc=$(find "$prefix" -name sbx.pc)
[[ -n $pc ]] || fail "no sbx.pc installed"
for f in include/sbx/sbx.h include/sbx/client.h include/sbx/error.h include/sbx/version.h; do
  [[ -f $prefix/$f ]] || fail "$f not installed"
done
libdir=$(dirname "$(dirname "$pc")")
ls "$libdir"/libsbx.so.* >/dev/null 2>&1 || fail "no shared library in $libdir"
[[ -f $libdir/libsbx.a ]] || fail "no static library in $libdir"
echo "ok: installed: $(cd "$prefix" && find . -type f -o -type l | sort | tr '\n' ' ')"

export PKG_CONFIG_PATH=$(dirname "$pc")
flags=$(pkg-config --cflags --libs sbx) || fail "pkg-config --cflags --libs sbx"
inc_ok=0
for w in $flags; do
  [[ $w == -I* && $(realpath -m "${w#-I}") == "$(realpath "$prefix/include")" ]] && inc_ok=1
done
[[ $inc_ok == 1 ]] || fail "cflags do not point into the prefix: $flags"
echo "ok: pkg-config: $flags"
# shellcheck disable=SC2086 # the flags are words
cc -std=c99 -Wall -Wextra -Werror $extra -o "$prefix/sbx_hello" "$here/external/sbx_hello.c" \
  $flags || fail "building against the installed libsbx"
echo "ok: built with the installed headers and library"
# the static library links too (with libcurl and jansson, shared: what sbx.pc requires)
# shellcheck disable=SC2086
cc -std=c99 $extra -o "$prefix/sbx_hello_static" "$here/external/sbx_hello.c" \
  $(pkg-config --cflags sbx) "$libdir/libsbx.a" $(pkg-config --libs libcurl jansson) ||
  fail "linking the installed static library"
echo "ok: the static library links"

start_server "$sbx"
out=$(LD_LIBRARY_PATH=$libdir "$prefix/sbx_hello" "$provider" 2>&1) || fail "sbx_hello: $out"
echo "$out"
[[ $(LD_LIBRARY_PATH=$libdir ldd "$prefix/sbx_hello" | grep libsbx) == *"$libdir"* ]] || fail "not run with the installed libsbx"
[[ $out == *"a bad client: "*version* ]] || fail "no error object from sbx_client_new"
[[ $out == *"stdout: ran"* && $out == *"exit 0, file: written"* ]] || fail "unexpected output"
out=$("$prefix/sbx_hello_static" "$provider" 2>&1) || fail "sbx_hello_static: $out"
[[ $out == *"exit 0, file: written"* ]] || fail "static: $out"
echo "ok: the program created a sandbox, ran a command, read its file and deleted it"
