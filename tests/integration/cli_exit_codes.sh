#!/bin/sh
# The CLI's exit codes: 0 ok, 2 for usage errors (unknown verb, stray args, no verb); exec's
# as docker exec's.
sbx="$1"
fail=0
check() { # expected-code description command...
    want=$1; shift; what=$1; shift
    "$@" >/dev/null 2>&1; got=$?
    if [ "$got" -ne "$want" ]; then echo "FAIL: $what: exit $got, want $want"; fail=1; fi
}
check 0 "--version" "$sbx" --version
check 0 "help" "$sbx" help
check 0 "help version" "$sbx" help version
check 0 "version -h" "$sbx" version -h
check 2 "no verb" "$sbx"
check 2 "unknown verb" "$sbx" frobnicate
check 2 "help of unknown verb" "$sbx" help frobnicate
check 2 "version with a stray argument" "$sbx" version extra
# exec exits as docker exec: 125 when sbx itself fails (usage, no server), before any command
check 125 "exec without a command" "$sbx" exec some-id
check 125 "exec -t without -i" "$sbx" exec -t some-id -- true
check 125 "exec with no server" env SBX_HOST=http://127.0.0.1:1 SBX_API_KEY=x "$sbx" exec some-id -- true
check 2 "create -i (no attach in sbx)" "$sbx" create -i
check 2 "create -c (no CPU weights)" "$sbx" create -c 512
check 2 "ls --format with an unknown field" "$sbx" ls --format '{{.Nope}}'
check 2 "create --name with a bad name" "$sbx" create --name 'no spaces'
[ "$fail" -eq 0 ] && echo "cli exit codes: all as expected"
exit $fail
