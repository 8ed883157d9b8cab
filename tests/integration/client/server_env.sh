# Sourced by client tests: start `sbx serve` on a free loopback port with a fresh state dir,
# export SBX_HOST and SBX_API_KEY for the CLI/libsbx, stop it by PID on exit.
#   start_server SBX_BINARY
start_server() {
  local sbx=$1
  SBX_TEST_STATE=$(mktemp -d /tmp/sbx-client-test-XXXXXX)
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  cat > "$SBX_TEST_STATE/sbx.conf" <<CONF
providers = { supported = ["native", "process"]; default = "native"; };
CONF
  "$sbx" serve --listen "127.0.0.1:$port" --state-dir "$SBX_TEST_STATE" \
    --config "$SBX_TEST_STATE/sbx.conf" >"$SBX_TEST_STATE/server.log" 2>&1 &
  SBX_TEST_SERVER_PID=$!
  trap stop_server EXIT
  for _ in $(seq 100); do
    curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
    kill -0 "$SBX_TEST_SERVER_PID" 2>/dev/null || { cat "$SBX_TEST_STATE/server.log"; exit 1; }
    sleep 0.1
  done
  export SBX_HOST="http://127.0.0.1:$port"
  export SBX_API_KEY
  SBX_API_KEY=$(cat "$SBX_TEST_STATE/api-key")
  SBX_TEST_BIN=$sbx
}

stop_server() {
  kill "$SBX_TEST_SERVER_PID" 2>/dev/null; wait "$SBX_TEST_SERVER_PID" 2>/dev/null
  "$SBX_TEST_BIN" gc --all --state-dir "$SBX_TEST_STATE" >/dev/null 2>&1
  rm -rf "$SBX_TEST_STATE"
}
