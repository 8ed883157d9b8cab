#!/usr/bin/env bash
# Start the main job in the foreground with embedded defaults.
# Until `sbx serve` lands this prints the version; see issue "sbx serve".
set -euo pipefail
bin=build/release/sbx
if "$bin" help serve >/dev/null 2>&1; then
  exec "$bin" serve --listen "${SBX_LISTEN:-127.0.0.1:8080}" "$@"
fi
exec "$bin" --version
