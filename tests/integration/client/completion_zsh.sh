#!/usr/bin/env bash
# completions/_sbx in a real zsh (zsh -f, compinit) against a real server: compinit registers
# it for sbx from its #compdef line; then _sbx runs with compadd/_describe/_files recording
# what it offers (zsh's own filters by $PREFIX, as compadd does): the verbs are exactly those
# of `sbx help`, each verb's flags exactly those its --help names (the same words the bash
# completion offers), desktop and net subcommands, net --bridge (the networks of a net state
# dir), sandbox ids for the verbs that take them (`cp`: ID:), files elsewhere.
#   completion_zsh.sh SBX_BINARY
set -uo pipefail
sbx=$1
here=$(cd "$(dirname "$0")" && pwd)
completions=$(cd "$here/../../../completions" && pwd)
command -v zsh >/dev/null || { echo "FAIL: zsh is not installed (scripts/deps.sh installs it)"; exit 1; }
. "$here/server_env.sh"
start_server "$sbx"
id=$("$sbx" create -q --provider process --timeout 600)
[[ -n $id ]] || { echo "FAIL: no sandbox"; exit 1; }
fails=0
work=$(mktemp -d /tmp/sbx-zsh-XXXXXX)
trap 'rm -rf "$work"; stop_server' EXIT

# complete WORDS...: what _sbx offers for the last word, one a line
complete() {
  SBX_COMPLETIONS=$completions ZDOTDIR=$work zsh -f -c '
    fpath=($SBX_COMPLETIONS $fpath)
    autoload -U compinit && compinit -u -d $ZDOTDIR/compdump || exit 3
    [[ $_comps[sbx] == _sbx ]] || { print -u2 "compinit did not register _sbx for sbx"; exit 4; }
    _call_program() { shift; eval "$@"; }
    _offer() { local c; for c in "$@"; do [[ $c == ${PREFIX}* ]] && print -r -- "$c$SUFFIX_"; done; }
    compadd() {
      local SUFFIX_=""
      while [[ $1 == -* ]]; do
        case $1 in --) shift; break ;; -S) SUFFIX_=$2; shift 2 ;; *) shift ;; esac
      done
      _offer "$@"
    }
    _describe() { local -a a; a=(${(P)${@[-1]}}); _offer ${a%%:*}; }
    _files() { print -r -- "<files>"; }
    words=("$@"); CURRENT=$#words; PREFIX=${words[-1]}
    _sbx' sbx-zsh "$sbx" "$@"
}
check() { # description expected-word: the last complete's output has it
  if grep -qxF -- "$2" "$work/out"; then echo "ok: $1"
  else echo "FAIL: $1: [$2] not in [$(tr '\n' ' ' <"$work/out")]"; fails=$((fails+1)); fi
}
absent() {
  if grep -qxF -- "$2" "$work/out"; then echo "FAIL: $1: [$2] offered"; fails=$((fails+1))
  else echo "ok: $1"; fi
}
same() { # description file-a file-b
  if diff -u "$2" "$3" >"$work/diff"; then echo "ok: $1"
  else echo "FAIL: $1:"; cat "$work/diff"; fails=$((fails+1)); fi
}

complete "" >"$work/out" || { echo "FAIL: zsh: $(cat "$work/out")"; exit 1; }
"$sbx" help | awk '/^Commands:/ {on=1; next} on && /^  [a-z]/ {print $1} /^$/ && on {exit}' \
  | sort >"$work/verbs"
[[ $(wc -l <"$work/verbs") -gt 10 ]] || { echo "FAIL: no verbs in sbx help"; exit 1; }
sort "$work/out" >"$work/got"
same "the verbs are those of sbx help" "$work/verbs" "$work/got"
complete "ex" >"$work/out"
check "a verb's start: exec" exec; absent "only what matches" create
complete "-" >"$work/out"
check "before a verb: --version" --version
for verb in $(cat "$work/verbs"); do
  "$sbx" "$verb" --help 2>&1 | grep -oE -- '(^|[ ,\[(`/])--?[a-zA-Z][a-zA-Z0-9-]*' \
    | sed -E 's/^[ ,[(`/]//' | sort -u >"$work/want"
  complete "$verb" "-" | sort -u >"$work/got"
  same "$verb: the flags of its --help" "$work/want" "$work/got"
done
complete create "--de" >"$work/out"
check "create --de: --desktop" --desktop
complete inspect "${id:0:4}" >"$work/out"
check "inspect: the sandbox's id" "$id"
complete exec "" >"$work/out"
check "exec: ids" "$id"
complete exec -H "$SBX_HOST" "" >"$work/out"
check "exec -H URL: ids of that server" "$id"
complete cp "${id:0:6}" >"$work/out"
check "cp: ID: to go on with a path" "$id:"
complete desktop "sh" >"$work/out"
check "desktop subcommands" shot
complete net "" >"$work/out"
check "net subcommands" gc
mkdir -p "$work/net/sbxcomp0/leases" "$work/net/notanet"
complete net gc --state-dir "$work/net" --bridge "" >"$work/out"
check "net --bridge: the networks of the state dir" sbxcomp0
absent "net --bridge: a dir without leases is none" notanet
complete create "" >"$work/out"
absent "create takes no id" "$id"; check "create: files" "<files>"
"$sbx" rm "$id"
complete inspect "" >"$work/out"
absent "a removed sandbox is not offered" "$id"
exit $(( fails > 0 ))
