# Shared helpers for the image integration tests (sourced, not run).
#   SBX=path/to/sbx; T=<private temp dir>; trap cleanup EXIT
set -euo pipefail

skip() { echo "SKIP: $*"; exit 77; }
die() { echo "FAIL: $*" >&2; exit 1; }
need() { for c in "$@"; do command -v "$c" >/dev/null || skip "$c is not installed (scripts/deps.sh)"; done; }

[[ $(id -u) -eq 0 ]] || skip "needs root (ownership, whiteout device nodes, trusted xattrs)"
need docker-registry skopeo busybox getfattr curl gzip zstd sha256sum

T=$(mktemp -d "/tmp/sbx-image-test.$$.XXXXXX")
PIDS=()
cleanup() {
    local rc=$?
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    rm -rf "$T"
    exit $rc
}
trap cleanup EXIT

sbx() { "$SBX" image "$@" --state-dir "$T/state"; }

# A port below the kernel's ephemeral range (outgoing connections cannot take it between the
# check and the bind) that nothing listens on.
free_port() {
    local lo p
    lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range)
    (( lo > 12000 )) || lo=32768
    for _ in $(seq 50); do
        p=$(( 10000 + (RANDOM + $$) % (lo - 10000) ))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
    done
    die "no free port"
}

# start_registry NAME [extra yaml]: a real docker-registry on 127.0.0.1; sets REG_PORT.
# Retried on another port if the first one was taken meanwhile (another test's server).
start_registry() {
    for _ in 1 2 3; do
        try_registry "$@" && return 0
    done
    cat "$T/$1/log" >&2
    die "registry $1 did not start"
}

try_registry() {
    local name=$1 extra=${2:-}
    REG_PORT=$(free_port)
    mkdir -p "$T/$name"
    cat > "$T/$name/config.yml" <<YAML
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $T/$name/data
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$REG_PORT
$extra
YAML
    docker-registry serve "$T/$name/config.yml" >"$T/$name/log" 2>&1 &
    local pid=$!
    PIDS+=("$pid")
    for _ in $(seq 300); do # the machine may be busy: up to 30 s
        local code
        code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$REG_PORT/v2/" || true)
        if [[ $code == 200 || $code == 401 ]]; then
            # Ours, not another test's server that won the port: ours would have exited.
            sleep 0.2
            kill -0 "$pid" 2>/dev/null && return 0
            return 1
        fi
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

sha() { sha256sum "$1" | cut -d' ' -f1; }
blob_in() { # blob_in LAYOUT FILE -> digest hex (copies the file into LAYOUT/blobs)
    local h; h=$(sha "$2"); cp "$2" "$1/blobs/sha256/$h"; echo "$h"
}

# build_rootfs: layer 1 (busybox + files) and layer 2 (whiteout + opaque dir) as plain tars.
build_layers() {
    local r1=$T/rootfs1 r2=$T/rootfs2
    mkdir -p "$r1/bin" "$r1/etc" "$r1/opq" "$r1/home/user" "$r2/etc" "$r2/opq"
    cp /bin/busybox "$r1/bin/busybox"
    ln -s busybox "$r1/bin/sh"
    echo hello > "$r1/etc/hello"
    echo doomed > "$r1/etc/gone"
    echo old > "$r1/opq/old"
    echo secret > "$r1/home/user/private"
    chmod 0640 "$r1/home/user/private"
    chmod 4755 "$r1/bin/busybox"
    ln "$r1/etc/hello" "$r1/etc/hello-link"
    : > "$r2/etc/.wh.gone"
    : > "$r2/opq/.wh..wh..opq"
    echo new > "$r2/opq/new"
    echo added > "$r2/etc/added"
    local tarargs=(--sort=name --mtime=2024-01-01 --numeric-owner --format=pax)
    tar "${tarargs[@]}" --owner=0 --group=0 -C "$r1" -cf "$T/layer1.tar" --exclude=./home .
    tar "${tarargs[@]}" --owner=1000 --group=1000 -C "$r1" -rf "$T/layer1.tar" ./home
    tar "${tarargs[@]}" --owner=0 --group=0 -C "$r2" -cf "$T/layer2.tar" .
    gzip -n -k "$T/layer1.tar" "$T/layer2.tar"
}

# write_image LAYOUT ARCH LAYER... -> prints the manifest digest hex (layers: .tar or .tar.gz)
write_image() {
    local dir=$1 arch=$2; shift 2
    mkdir -p "$dir/blobs/sha256"
    local layers="" diffs="" l h size sep=""
    for l in "$@"; do
        h=$(blob_in "$dir" "$l")
        size=$(stat -c %s "$l")
        local mt=tar
        [[ $l == *.gz ]] && mt=tar+gzip
        layers+="$sep{\"mediaType\":\"application/vnd.oci.image.layer.v1.$mt\",\"digest\":\"sha256:$h\",\"size\":$size}"
        diffs+="$sep\"sha256:$(gzip -dcf "$l" | sha256sum | cut -d' ' -f1)\""
        sep=","
    done
    cat > "$T/config.json" <<JSON
{"architecture":"$arch","os":"linux","created":"2024-01-01T00:00:00Z",
 "config":{"Env":["PATH=/bin","GREETING=hi"],"Entrypoint":["/bin/sh","-c"],"Cmd":["echo hi"],
           "WorkingDir":"/etc","User":"1000:1000"},
 "rootfs":{"type":"layers","diff_ids":[$diffs]}}
JSON
    local ch; ch=$(blob_in "$dir" "$T/config.json")
    cat > "$T/manifest.json" <<JSON
{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",
 "config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:$ch","size":$(stat -c %s "$T/config.json")},
 "layers":[$layers]}
JSON
    blob_in "$dir" "$T/manifest.json"
}

# write_layout LAYOUT TAG DIGEST_HEX [platform json]: index.json with one manifest
write_layout() {
    local dir=$1 tag=$2 h=$3 plat=${4:-}
    echo '{"imageLayoutVersion":"1.0.0"}' > "$dir/oci-layout"
    cat > "$dir/index.json" <<JSON
{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json",
 "digest":"sha256:$h","size":$(stat -c %s "$dir/blobs/sha256/$h"),
 "annotations":{"org.opencontainers.image.ref.name":"$tag"}$plat}]}
JSON
}

push() { skopeo copy -q --dest-tls-verify=false "$@"; }
