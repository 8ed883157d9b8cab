#!/usr/bin/env bash
# `make run`: start the server in the foreground with the embedded defaults (SQLite store,
# API key and images in /var/lib/sbx, the native provider, the built-in host image).
#   SBX_LISTEN=ADDR:PORT (default 127.0.0.1:8080); extra arguments go to `sbx serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
exec build/release/sbx serve --listen "${SBX_LISTEN:-127.0.0.1:8080}" "$@"
