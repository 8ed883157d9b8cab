#!/usr/bin/env bash
# sbx image pull from a real docker-registry: gzip, zstd and multi-arch images, whiteouts and
# opaque dirs in the unpacked layers (checked through a real overlayfs mount), blob caching,
# ls, resolve, rm with garbage collection of unshared layers, and the not-found errors.
SBX=$1 PROBE=$2
source "$(dirname "$0")/lib.sh"

build_layers
m_bb=$(write_image "$T/oci" amd64 "$T/layer1.tar.gz" "$T/layer2.tar.gz")
write_layout "$T/oci" 1 "$m_bb"
m_base=$(write_image "$T/base" amd64 "$T/layer1.tar.gz")
write_layout "$T/base" 1 "$m_base"
l1=$(sha "$T/layer1.tar.gz")
l2=$(sha "$T/layer2.tar.gz")

start_registry reg
R=127.0.0.1:$REG_PORT
push "oci:$T/oci:1" "docker://$R/test/bb:1"
push "oci:$T/base:1" "docker://$R/test/base:1"
# skopeo only recompresses uncompressed sources, so the zstd copy starts from plain tars; and
# they differ from the gzip ones (another mtime): skopeo's blob-info cache would otherwise
# reuse the gzip blobs already in the registry for the same uncompressed content.
for n in 1 2; do
    tar --sort=name --mtime=2024-02-02 --numeric-owner --format=pax --owner=0 --group=0 \
        -C "$T/rootfs$n" -cf "$T/zlayer$n.tar" .
done
write_layout "$T/plain" 1 "$(write_image "$T/plain" amd64 "$T/zlayer1.tar" "$T/zlayer2.tar")"
push --dest-compress-format zstd "oci:$T/plain:1" "docker://$R/test/bbz:1"

echo "== pull (gzip)"
out=$(sbx pull "$R/test/bb:1" 2>"$T/pull.err")
[[ $out == "sha256:$m_bb" ]] || die "pull printed '$out', want sha256:$m_bb"
[[ ! -s $T/pull.err ]] || die "progress without a terminal: $(cat "$T/pull.err")"
S=$T/state/images
L1=$S/layers/sha256/$l1 L2=$S/layers/sha256/$l2
[[ -d $L1 && -d $L2 ]] || die "layers not unpacked under $S/layers"
[[ $(cat "$L1/etc/hello") == hello ]] || die "file content"
[[ $(stat -c '%a %u' "$L1/bin/busybox") == "4755 0" ]] || die "setuid mode lost"
[[ $(stat -c '%a %u:%g' "$L1/home/user/private") == "640 1000:1000" ]] || die "owner/mode lost"
[[ $(readlink "$L1/bin/sh") == busybox ]] || die "symlink"
[[ $(stat -c %i "$L1/etc/hello") == $(stat -c %i "$L1/etc/hello-link") ]] || die "hard link"
[[ $(stat -c '%F %t:%T' "$L2/etc/gone") == "character special file 0:0" ]] || die "whiteout"
[[ ! -e $L2/etc/.wh.gone && ! -e $L2/opq/.wh..wh..opq ]] || die "OCI whiteout files left"
[[ $(getfattr --absolute-names --only-values -n trusted.overlay.opaque "$L2/opq") == y ]] || die "opaque xattr"

echo "== the layers as overlayfs lower dirs (as the runtime mounts them)"
mkdir "$T/mnt"
unshare -m sh -ec "
    mount -t overlay overlay -o lowerdir=$L2:$L1 '$T/mnt'
    test ! -e '$T/mnt/etc/gone'
    test ! -e '$T/mnt/opq/old'
    test \"\$(cat '$T/mnt/opq/new')\" = new
    test \"\$(chroot '$T/mnt' /bin/busybox cat /etc/hello /etc/added)\" = \"\$(printf 'hello\nadded')\"
" || die "overlay view of the image is wrong"

echo "== resolve"
"$PROBE" "$S" "$R/test/bb:1" > "$T/resolved"
grep -qx "digest=sha256:$m_bb" "$T/resolved" || die "resolve digest"
[[ $(grep '^layer=' "$T/resolved" | tr '\n' ' ') == "layer=$L1 layer=$L2 " ]] || die "resolve layers"
grep -qx 'env=GREETING=hi' "$T/resolved" && grep -qx 'workdir=/etc' "$T/resolved" &&
    grep -qx 'user=1000:1000' "$T/resolved" && grep -qx 'entrypoint=-c' "$T/resolved" &&
    grep -qx 'cmd=echo hi' "$T/resolved" || die "resolve config: $(cat "$T/resolved")"
"$PROBE" "$S" "${m_bb:0:12}" | grep -cx "digest=sha256:$m_bb" >/dev/null || die "resolve by digest prefix"
if "$PROBE" "$S" host 2> "$T/err"; then die "host resolved"; fi
grep -q 'code=3 .*built-in' "$T/err" || die "host: $(cat "$T/err")"

echo "== pull again: blobs come from the store"
ino=$(stat -c %i "$S/blobs/sha256/$l1")
SBX_LOG_LEVEL=debug sbx pull "$R/test/bb:1" 2> "$T/log" >/dev/null
[[ $(grep -c 'already in the store' "$T/log") == 3 ]] || die "re-pull downloaded: $(cat "$T/log")"
[[ $(stat -c %i "$S/blobs/sha256/$l1") == "$ino" ]] || die "layer blob rewritten"

echo "== zstd layers"
echo "== progress per layer on a terminal (script(1) gives the pull a pty)"
need script
script -qec "$SBX image pull $R/test/bbz:1 --state-dir $T/state" /dev/null >"$T/tty.out" ||
    die "pull on a terminal: $(cat "$T/tty.out")"
tr '\r' '\n' <"$T/tty.out" >"$T/tty.lines"
grep -q "^Pulling $R/test/bbz:1" "$T/tty.lines" || die "no Pulling line: $(cat "$T/tty.lines")"
[[ $(grep -c 'Downloading .*(layer [12] of 2)' "$T/tty.lines") -ge 2 ]] ||
    die "no per-layer download progress: $(cat "$T/tty.lines")"
[[ $(grep -c ': Pull complete' "$T/tty.lines") == 2 ]] || die "not two completed layers: $(cat "$T/tty.lines")"
script -qec "$SBX image pull $R/test/bbz:1 --state-dir $T/state" /dev/null >"$T/tty2.out"
[[ $(tr '\r' '\n' <"$T/tty2.out" | grep -c ': Already exists') == 2 ]] ||
    die "a second pull: not two cached layers: $(cat "$T/tty2.out")"
out=$(sbx pull "$R/test/bbz:1")
zman=$(curl -sf -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
    "http://$R/v2/test/bbz/manifests/1")
grep -q 'tar+zstd' <<< "$zman" || die "skopeo did not push zstd layers: $zman"
"$PROBE" "$S" "$R/test/bbz:1" > "$T/zres"
zl2=$(grep '^layer=' "$T/zres" | tail -1 | cut -d= -f2)
[[ $zl2 != "$L2" && $(stat -c '%F' "$zl2/etc/gone") == "character special file" ]] ||
    die "zstd layer: $(cat "$T/zres"; ls -la "$zl2" "$zl2/etc")"
[[ $(cat "$(grep '^layer=' "$T/zres" | head -1 | cut -d= -f2)/etc/hello") == hello ]] ||
    die "zstd content"

echo "== multi-arch index: the host's platform is chosen, --platform overrides"
m_arm=$(write_image "$T/multi" arm64 "$T/layer1.tar.gz")
m_amd=$(write_image "$T/multi" amd64 "$T/layer1.tar.gz" "$T/layer2.tar.gz")
echo '{"imageLayoutVersion":"1.0.0"}' > "$T/multi/oci-layout"
desc() { echo "{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"sha256:$1\",\"size\":$(stat -c %s "$T/multi/blobs/sha256/$1"),\"platform\":{\"os\":\"linux\",\"architecture\":\"$2\"}}"; }
idx="{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\",\"manifests\":[$(desc "$m_arm" arm64),$(desc "$m_amd" amd64)]}"
printf '%s' "$idx" > "$T/idx.json"
ih=$(blob_in "$T/multi" "$T/idx.json")
echo "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"application/vnd.oci.image.index.v1+json\",\"digest\":\"sha256:$ih\",\"size\":$(stat -c %s "$T/idx.json"),\"annotations\":{\"org.opencontainers.image.ref.name\":\"1\"}}]}" > "$T/multi/index.json"
push --all "oci:$T/multi:1" "docker://$R/test/multi:1"
host_arch=$(uname -m | sed 's/x86_64/amd64/;s/aarch64/arm64/')
want=$m_amd; [[ $host_arch == arm64 ]] && want=$m_arm
[[ $(sbx pull "$R/test/multi:1") == "sha256:$want" ]] || die "index: wrong manifest"
[[ $(sbx pull --platform linux/arm64 "$R/test/multi@sha256:$ih") == "sha256:$m_arm" ]] ||
    die "index: --platform linux/arm64"
if sbx pull --platform linux/s390x "$R/test/multi:1" 2> "$T/err"; then die "s390x pulled"; fi
grep -q 'no image for platform linux/s390x' "$T/err" || die "platform error: $(cat "$T/err")"

echo "== ls"
sbx ls > "$T/ls"
grep -q "^$R/test/bb:1 *${m_bb:0:12} " "$T/ls" || die "ls: $(cat "$T/ls")"
grep -q "^REF *DIGEST *SIZE *CREATED" "$T/ls" || die "ls header"
sbx ls --json | grep -c "\"digest\": \"sha256:$m_bb\"" >/dev/null || die "ls --json"

echo "== not found"
if sbx pull "$R/test/bb:nope" 2> "$T/err"; then die "missing tag pulled"; fi
grep -q "test/bb:nope" "$T/err" && grep -q "not found" "$T/err" || die "tag error: $(cat "$T/err")"
if sbx pull "$R/no/such" 2> "$T/err"; then die "missing repo pulled"; fi
grep -q "not found" "$T/err" || die "repo error: $(cat "$T/err")"
if sbx rm "$R/test/never:1" 2> "$T/err"; then die "rm of a missing image succeeded"; fi

echo "== rm: unshared layers are collected, shared and pinned ones stay"
S2=$T/state2/images
sbx2() { "$SBX" image "$@" --state-dir "$T/state2"; }
sbx2 pull "$R/test/bb:1" >/dev/null
sbx2 pull "$R/test/base:1" >/dev/null
owner=sbx-image-test-$$
"$PROBE" "$S2" pin "$owner" "sha256:$m_bb"
sbx2 rm "$R/test/bb:1"
[[ -d $S2/layers/sha256/$l2 ]] || die "pinned (in use) layer collected"
"$PROBE" "$S2" unpin "$owner"
"$PROBE" "$S2" gc
if "$PROBE" "$S2" pin "$owner" "sha256:$m_bb" 2> "$T/err"; then die "pinned a removed image"; fi
grep -q "code=3" "$T/err" || die "pin of a removed image: $(cat "$T/err")"
[[ -d $S2/layers/sha256/$l1 ]] || die "shared layer removed"
[[ ! -e $S2/layers/sha256/$l2 && ! -e $S2/blobs/sha256/$l2 ]] || die "unshared layer kept"
[[ ! -e $S2/blobs/sha256/$m_bb ]] || die "manifest blob kept"
sbx2 ls | grep -c "test/base:1" >/dev/null || die "base image lost"
sbx2 rm "$R/test/base:1"
[[ -z $(ls "$S2/layers/sha256") && -z $(ls "$S2/blobs/sha256") ]] || die "store not empty after rm"

echo "== concurrent pulls of the same image into one store"
cpids=()
for i in 1 2 3; do
    "$SBX" image pull "$R/test/bb:1" --state-dir "$T/state3" > "$T/c$i.out" 2>&1 &
    cpids+=($!)
done
for p in "${cpids[@]}"; do wait "$p" || die "a concurrent pull failed: $(cat "$T"/c*.out)"; done
S3=$T/state3/images
[[ $(cat "$S3/layers/sha256/$l1/etc/hello") == hello ]] || die "concurrent: layer 1"
[[ -c $S3/layers/sha256/$l2/etc/gone ]] || die "concurrent: layer 2"
[[ -z $(ls -A "$S3/tmp") ]] || die "concurrent: temp files left: $(ls -A "$S3/tmp")"
"$PROBE" "$S3" "$R/test/bb:1" | grep -cx "digest=sha256:$m_bb" >/dev/null || die "concurrent: resolve"

echo "== a registry serving corrupt bytes: digest mismatch, nothing stored"
data=$T/reg/data/docker/registry/v2/blobs/sha256/${l2:0:2}/$l2/data
[[ -f $data ]] || die "registry blob not at $data"
head -c "$(stat -c %s "$data")" /dev/urandom > "$data"
if sbx2 pull "$R/test/bb:1" 2> "$T/err"; then die "corrupt blob accepted"; fi
grep -q "digest mismatch" "$T/err" || die "corrupt blob error: $(cat "$T/err")"
[[ ! -e $S2/blobs/sha256/$l2 && -z $(ls -A "$S2/tmp") ]] || die "corrupt blob kept"
if sbx2 ls | grep -c test/bb >/dev/null; then die "image named despite a corrupt layer"; fi

echo "PASS"
