#!/bin/sh
# The CLI's exit codes: 0 ok, 2 for usage errors (unknown verb, stray args, no verb).
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
[ "$fail" -eq 0 ] && echo "cli exit codes: all as expected"
exit $fail
