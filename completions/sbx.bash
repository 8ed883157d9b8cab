# bash completion for sbx: verbs, each verb's flags and sandbox ids.
# Verbs and flags are read from `sbx --help` and `sbx VERB --help` when completing, so this file
# never lists them itself and cannot drift from the binary; sandbox ids and names come from `sbx ls`
# (the server of SBX_HOST, or of a --host/-H already on the line).
#   source completions/sbx.bash     (or install as /usr/share/bash-completion/completions/sbx)

_sbx_verbs() {
  "$1" --help 2>/dev/null | awk '/^Commands:/ {on=1; next} on && /^  [a-z]/ {print $1} /^$/ && on {exit}'
}

_sbx_flags() {
  "$1" "$2" --help 2>&1 | grep -oE -- '(^|[ ,\[])--?[a-zA-Z][a-zA-Z0-9-]*' | tr -d ' ,[' | sort -u
}

# the bridge networks of a net state dir (sbx net --bridge): its dirs with a lease dir
_sbx_bridges() {
  local d
  for d in "${1:-/run/sbx/net}"/*/leases; do
    [[ -d $d ]] && basename "${d%/leases}"
  done
}

# verbs whose positional arguments are sandbox ids (cp: ID:/path, completed as ID:)
_sbx_takes_id() {
  case $1 in
    inspect|exec|pause|resume|stop|start|renew|rm|desktop|cp) return 0 ;;
  esac
  return 1
}

_sbx() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} sbx=${COMP_WORDS[0]}
  local verb="" netdir="" i
  local -a host=()
  for ((i = 1; i < COMP_CWORD; i++)); do
    case ${COMP_WORDS[i]} in
      -H|--host) host=(--host "${COMP_WORDS[i+1]}") ;;
      -d|--state-dir) netdir=${COMP_WORDS[i+1]} ;;
      -*) ;;
      *) [[ -z $verb ]] && verb=${COMP_WORDS[i]} ;;
    esac
  done
  if [[ -z $verb ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$(_sbx_verbs "$sbx") --help --version" -- "$cur")
    return
  fi
  if [[ $cur == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$(_sbx_flags "$sbx" "$verb")" -- "$cur")
    return
  fi
  if [[ $verb == desktop && $COMP_CWORD -eq 2 ]]; then
    mapfile -t COMPREPLY < <(compgen -W "status start stop shot do tree windows record record-stop view" -- "$cur")
    return
  fi
  if [[ $verb == net && $COMP_CWORD -eq 2 ]]; then
    mapfile -t COMPREPLY < <(compgen -W "ls gc" -- "$cur")
    return
  fi
  if [[ $verb == net && ($prev == -b || $prev == --bridge) ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$(_sbx_bridges "$netdir")" -- "$cur")
    return
  fi
  if _sbx_takes_id "$verb"; then
    local ids
    ids=$("$sbx" ls --format '{{.ID}} {{.Name}}' "${host[@]}" 2>/dev/null)
    [[ $verb == cp ]] && ids=$(printf '%s:\n' $ids)
    mapfile -t COMPREPLY < <(compgen -W "$ids" -- "$cur")
    [[ $verb == cp ]] && compopt -o nospace 2>/dev/null
    return
  fi
  mapfile -t COMPREPLY < <(compgen -f -- "$cur")
}
complete -F _sbx sbx
