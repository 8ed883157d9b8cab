#!/usr/bin/env bash
# Wire compatibility: the published OpenSandbox JS SDK against a real sbx server.
#   tests/compat/run.sh SBX_BINARY PROVIDER WORKDIR
# Installs the pinned SDK with npm into WORKDIR, starts `sbx serve` on a free loopback port
# with a fresh state dir, runs scenarios.test.mjs with node's test runner, stops the server
# by PID. Exit 77 (skip) only when node/npm are missing (docker: or no engine can start).
set -uo pipefail
sbx=$1 provider=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
command -v node >/dev/null && command -v npm >/dev/null || { echo "skip: node/npm not installed"; exit 77; }

# provider docker: a private engine (dockerd, else podman) and a local registry holding a
# BusyBox image, started around this script by engine.py (it sets SBX_DOCKER_* and SBX_IMAGE;
# exit 77 only when neither engine can start).
if [[ $provider == docker && -z ${SBX_DOCKER_SOCKET:-} ]]; then
  exec python3 "$here/../integration/docker/engine.py" run --engine "${SBX_DOCKER_ENGINE:-dockerd}" \
    -- "$0" "$@"
fi

# provider kubernetes: the FAKE Kubernetes API server and kubelet (tests/integration/kubernetes,
# root) started around this script by fake_env.py (it sets SBX_KUBECONFIG, SBX_KUBE_EXECD_IMAGE
# and SBX_IMAGE; exit 77 when it cannot run here). SBX_EXECD_STATIC: the static sbx-execd.
if [[ $provider == kubernetes && -z ${SBX_KUBECONFIG:-} ]]; then
  [[ -n ${SBX_EXECD_STATIC:-} ]] || { echo "skip: SBX_EXECD_STATIC is not set"; exit 77; }
  exec /usr/bin/python3 "$here/../integration/kubernetes/fake_env.py" "$SBX_EXECD_STATIC" \
    -- "$0" "$@"
fi

mkdir -p "$work"
cp "$here/package.json" "$here/scenarios.test.mjs" "$work/"
if [[ ! -d "$work/node_modules/@alibaba-group/opensandbox" ]]; then
  (cd "$work" && npm install --no-package-lock --no-audit --no-fund --loglevel=error) || {
    echo "npm install of the pinned SDK failed"; exit 1; }
fi

state=$(mktemp -d /tmp/sbx-compat-XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
if [[ $provider == docker ]]; then
  cat > "$state/sbx.conf" <<CONF
providers = { supported = ["docker"]; default = "docker";
  docker = { socket = "$SBX_DOCKER_SOCKET"; network = "none"; cgroup_parent = "$SBX_DOCKER_CGROUP"; }; };
CONF
elif [[ $provider == kubernetes ]]; then
  cat > "$state/sbx.conf" <<CONF
providers = { supported = ["kubernetes"]; default = "kubernetes";
  kubernetes = { kubeconfig = "$SBX_KUBECONFIG"; namespace = "sbx";
    execd_image = "$SBX_KUBE_EXECD_IMAGE"; poll_ms = 100; wait_timeout_ms = 60000;
    workspace_pvc_size = "1Gi"; }; };
CONF
else
  cat > "$state/sbx.conf" <<CONF
providers = { supported = ["native", "process"]; default = "native"; };
CONF
fi
# an OCI image of our own for the native snapshot scenario (the host image has no layers)
python3 "$here/../../scripts/busybox_image.py" "$state/busybox.tar" sbx-test/busybox:1 &&
  "$sbx" image import --state-dir "$state" "$state/busybox.tar" >/dev/null ||
  { echo "could not import the BusyBox test image"; exit 1; }
"$sbx" serve --listen "127.0.0.1:$port" --state-dir "$state" --config "$state/sbx.conf" \
  >"$state/server.log" 2>&1 &
pid=$!
cleanup() {
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  "$sbx" gc --all --state-dir "$state" >/dev/null 2>&1
  rm -rf "$state"
}
trap cleanup EXIT
for _ in $(seq 100); do
  curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
  kill -0 "$pid" 2>/dev/null || { echo "server died:"; cat "$state/server.log"; exit 1; }
  sleep 0.1
done
key=$(cat "$state/api-key")
cd "$work"
OPEN_SANDBOX_DOMAIN="127.0.0.1:$port" OPEN_SANDBOX_API_KEY="$key" SBX_PROVIDER="$provider" \
  node --test --test-reporter=spec scenarios.test.mjs
rc=$?
[[ $rc -ne 0 ]] && { echo "--- server log (last 60 lines)"; tail -60 "$state/server.log"; }
exit $rc
