#!/usr/bin/env bash
# Start a real server, then run the libsbx test binary against it.
#   run_libsbx.sh SBX_BINARY TEST_BINARY PROVIDER
set -uo pipefail
[[ $(id -u) -eq 0 || $3 == process ]] || { echo "skip: needs root"; exit 77; }
. "$(dirname "$0")/server_env.sh"
start_server "$1"
"$2" "$3"
