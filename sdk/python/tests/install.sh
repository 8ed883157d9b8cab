#!/usr/bin/env bash
# `pip install ./sdk/python` into a fresh virtual environment, with no package index (the
# in-tree build backend needs none), then the installed package imports and builds a client.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
py=${1:-python3}
tmp=$(mktemp -d /tmp/sbx-sdk-install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
"$py" -m venv "$tmp/venv" 2>/dev/null || { echo "skip: no venv/ensurepip for $py"; exit 77; }
PIP_NO_INDEX=1 "$tmp/venv/bin/pip" install --quiet --no-index "$here"
cd "$tmp"   # not the checkout: the installed copy must be the one imported
"$tmp/venv/bin/python" - <<'PY'
import sbx, sbx.files, os
assert os.path.dirname(sbx.__file__).startswith(os.getcwd()), sbx.__file__
c = sbx.Client("127.0.0.1:1", "k")
assert c.url == "http://127.0.0.1:1"
print("installed", sbx.__version__)
PY
