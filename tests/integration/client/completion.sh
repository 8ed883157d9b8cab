#!/usr/bin/env bash
# completions/sbx.bash in a real bash against a real server: verbs, a verb's flags (read from
# the binary's own --help, so they cannot drift), desktop and net subcommands, net --bridge (the
# networks of a net state dir), sandbox ids for the verbs that take them (`cp` gets ID:), files
# elsewhere.
#   completion.sh SBX_BINARY
set -uo pipefail
sbx=$1
here=$(cd "$(dirname "$0")" && pwd)
. "$here/server_env.sh"
start_server "$sbx"
. "$here/../../../completions/sbx.bash"
fails=0
check() { # description expected-word actual-words...
  local what=$1 want=$2; shift 2
  if printf '%s\n' "$@" | grep -qx -- "$want"; then echo "ok: $what"
  else echo "FAIL: $what: [$want] not in [$*]"; fails=$((fails+1)); fi
}
absent() {
  local what=$1 bad=$2; shift 2
  if printf '%s\n' "$@" | grep -qx -- "$bad"; then echo "FAIL: $what: [$bad] offered"; fails=$((fails+1))
  else echo "ok: $what"; fi
}
complete_line() { # words...: COMPREPLY for the last word
  COMP_WORDS=("$sbx" "$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); COMPREPLY=()
  _sbx
}
id=$("$sbx" create -q --provider process --timeout 600 --name compl-1)

complete_line ""
check "verbs: create" create "${COMPREPLY[@]}"; check "verbs: serve" serve "${COMPREPLY[@]}"
complete_line "ex"
check "a verb's start: exec" exec "${COMPREPLY[@]}"; absent "only what matches" create "${COMPREPLY[@]}"
complete_line create "--de"
check "create's flags from its --help: --desktop" --desktop "${COMPREPLY[@]}"
complete_line ls "-"
check "ls flags: --quiet" --quiet "${COMPREPLY[@]}"; check "ls flags: --json" --json "${COMPREPLY[@]}"
complete_line inspect "${id:0:4}"
check "inspect: the sandbox's id" "$id" "${COMPREPLY[@]}"
complete_line exec ""
check "exec: ids" "$id" "${COMPREPLY[@]}"
complete_line exec "compl"
check "exec: names" compl-1 "${COMPREPLY[@]}"
complete_line cp "${id:0:6}"
check "cp: ID: to go on with a path" "$id:" "${COMPREPLY[@]}"
complete_line desktop "sh"
check "desktop subcommands" shot "${COMPREPLY[@]}"
complete_line net ""
check "net subcommands" gc "${COMPREPLY[@]}"
nd=$(mktemp -d /tmp/sbx-compl-net-XXXXXX)
mkdir -p "$nd/sbxcomp0/leases" "$nd/notanet"
complete_line net gc --state-dir "$nd" --bridge ""
check "net --bridge: the networks of the state dir" sbxcomp0 "${COMPREPLY[@]}"
absent "net --bridge: a dir without leases is none" notanet "${COMPREPLY[@]}"
rm -rf "$nd"
complete_line create ""
absent "create takes no id" "$id" "${COMPREPLY[@]}"
"$sbx" rm "$id"
complete_line inspect ""
absent "a removed sandbox is not offered" "$id" "${COMPREPLY[@]}"
[[ $(complete -p sbx) == *"-F _sbx"* ]] && echo "ok: registered for sbx" || { echo "FAIL: not registered"; fails=$((fails+1)); }
exit $(( fails > 0 ))
