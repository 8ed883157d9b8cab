#!/usr/bin/env bash
# sbx image import: OCI layout tars (from skopeo oci-archive and hand-made, with a nested
# multi-arch index), docker save tars (skopeo docker-archive), and hostile layers that try to
# write outside the layer dir (../, absolute path, symlink followed by a write through it).
SBX=$1 PROBE=$2
source "$(dirname "$0")/lib.sh"

build_layers
m_bb=$(write_image "$T/oci" amd64 "$T/layer1.tar.gz" "$T/layer2.tar.gz")
write_layout "$T/oci" 1 "$m_bb"
S=$T/state/images

echo "== OCI archive (skopeo oci-archive): a bare tag names nothing, --tag does"
skopeo copy -q "oci:$T/oci:1" "oci-archive:$T/bb-oci.tar:1"
if sbx import "$T/bb-oci.tar" 2> "$T/err"; then die "import without a name succeeded"; fi
grep -q -- "--tag" "$T/err" || die "no-name error: $(cat "$T/err")"
[[ $(sbx import --tag test/imp:1 "$T/bb-oci.tar") == "sha256:$m_bb" ]] || die "oci import digest"
"$PROBE" "$S" test/imp:1 > "$T/res"
grep -qx "digest=sha256:$m_bb" "$T/res" || die "resolve imported image"
L2=$(grep '^layer=' "$T/res" | tail -1 | cut -d= -f2)
[[ $(stat -c '%F %t:%T' "$L2/etc/gone") == "character special file 0:0" ]] || die "whiteout"
[[ $(getfattr --absolute-names --only-values -n trusted.overlay.opaque "$L2/opq") == y ]] ||
    die "opaque"

echo "== hand-made OCI layout tar (./ names, full name in the annotation)"
write_layout "$T/oci" localhost:5000/test/own:2 "$m_bb"
tar -C "$T/oci" -cf "$T/own.tar" .
write_layout "$T/oci" 1 "$m_bb"
sbx import "$T/own.tar" >/dev/null
sbx ls | grep -c "^localhost:5000/test/own:2 " >/dev/null || die "annotation name not used: $(sbx ls)"

echo "== OCI layout with a nested multi-arch index"
m_arm=$(write_image "$T/multi" arm64 "$T/layer1.tar.gz")
m_amd=$(write_image "$T/multi" amd64 "$T/layer1.tar.gz" "$T/layer2.tar.gz")
desc() { echo "{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"sha256:$1\",\"size\":$(stat -c %s "$T/multi/blobs/sha256/$1"),\"platform\":{\"os\":\"linux\",\"architecture\":\"$2\"}}"; }
printf '%s' "{\"schemaVersion\":2,\"manifests\":[$(desc "$m_arm" arm64),$(desc "$m_amd" amd64)]}" > "$T/idx.json"
ih=$(blob_in "$T/multi" "$T/idx.json")
write_layout "$T/multi" 1 "$ih"
tar -C "$T/multi" -cf "$T/multi.tar" oci-layout index.json blobs
want=$m_amd; [[ $(uname -m) == aarch64 ]] && want=$m_arm
[[ $(sbx import --tag test/multi:1 "$T/multi.tar") == "sha256:$want" ]] || die "nested index"

echo "== docker save tar (skopeo docker-archive)"
skopeo copy -q "oci:$T/oci:1" "docker-archive:$T/bb-docker.tar:test/dock:1"
tar -tf "$T/bb-docker.tar" | grep -cx manifest.json >/dev/null || die "not a docker-save tar"
d=$(sbx import "$T/bb-docker.tar")
"$PROBE" "$S" docker.io/test/dock:1 > "$T/dres" || die "docker import not named from RepoTags"
grep -qx "digest=$d" "$T/dres" || die "docker import digest"
grep -qx 'cmd=echo hi' "$T/dres" || die "docker import config"
DL1=$(grep '^layer=' "$T/dres" | head -1 | cut -d= -f2)
DL2=$(grep '^layer=' "$T/dres" | tail -1 | cut -d= -f2)
[[ $(cat "$DL1/etc/hello") == hello && -u $DL1/bin/busybox ]] || die "docker layer 1"
[[ $(stat -c '%F %t:%T' "$DL2/etc/gone") == "character special file 0:0" ]] || die "docker wh"

echo "== classic docker save: Layers named <id>/layer.tar, symlinks to the layer files"
mkdir "$T/legacy"
tar -C "$T/legacy" -xf "$T/bb-docker.tar"
for l in "$T"/legacy/*/layer.tar; do
    [[ -L $l ]] || die "skopeo's docker-archive has no <id>/layer.tar symlinks"
    t=$(readlink "$l")
    id=$(basename "$(dirname "$l")")
    sed -i "s|\"${t#../}\"|\"$id/layer.tar\"|" "$T/legacy/manifest.json"
done
grep -q '/layer.tar"' "$T/legacy/manifest.json" || die "manifest.json not rewritten"
tar -C "$T/legacy" -cf "$T/legacy.tar" .
sbx import --tag test/legacy:1 "$T/legacy.tar" >/dev/null
"$PROBE" "$S" test/legacy:1 > "$T/lres"
[[ $(grep '^layer=' "$T/lres") == $(grep '^layer=' "$T/dres") ]] || die "legacy layers differ"

echo "== hostile layers are refused and nothing lands outside the layer dir"
mkdir -p "$T/h/sub" "$T/outside" "$T/h3/real/link"
echo evil > "$T/h/evil"
(cd "$T/h/sub" && tar -P -cf "$T/hostile-dotdot.tar" ../evil)
echo evil > "$T/abs-evil"
tar -P -cf "$T/hostile-abs.tar" "$T/abs-evil"
rm "$T/abs-evil" "$T/h/evil"
ln -s "$T/outside" "$T/h3/link"
echo evil > "$T/h3/real/link/pwned"
tar -cf "$T/hostile-symlink.tar" -C "$T/h3" link
tar -rf "$T/hostile-symlink.tar" -C "$T/h3/real" link/pwned
for kind in dotdot abs symlink; do
    lay=$T/hostile-$kind
    write_layout "$lay" "localhost/evil/$kind:1" "$(write_image "$lay" amd64 "$T/hostile-$kind.tar")"
    tar -C "$lay" -cf "$T/hostile-$kind-image.tar" .
    if sbx import "$T/hostile-$kind-image.tar" 2> "$T/err"; then die "hostile $kind imported"; fi
    grep -q "layer entry" "$T/err" || die "hostile $kind: $(cat "$T/err")"
    h=$(sha "$T/hostile-$kind.tar")
    [[ ! -e $S/layers/sha256/$h ]] || die "hostile $kind: layer dir published"
done
[[ ! -e $T/h/evil && ! -e $T/evil && ! -e $T/abs-evil ]] || die "file written outside"
[[ -z $(ls -A "$T/outside") ]] || die "wrote through a symlink: $(ls -A "$T/outside")"
[[ -z $(ls -A "$S/tmp") ]] || die "temp files left: $(ls -A "$S/tmp")"
if sbx ls | grep -c evil >/dev/null; then die "hostile image named"; fi

echo "PASS"
