# The README's two commands:
#   make run    install what is missing, build (release), start the server on 127.0.0.1
#   make test   install what is missing, build the dev preset (ASan/UBSan), run every test
# and the rest: make build | deb | lint | bench | torture | soak | clean | desktop-image | osworld-image
#               | images

.PHONY: all deps build run test deb lint ci bench torture soak clean desktop-image osworld-image \
        images
all: build

deps:
	@scripts/deps.sh

build: deps
	@[ -f build/release/build.ninja ] || cmake --preset release >/dev/null
	@cmake --build build/release

run: build
	@scripts/run.sh $(ARGS)

test: deps
	@cmake --preset dev >/dev/null
	@cmake --build build/dev
	@ctest --preset dev

# The Debian package (debian/, docs/install.md): build/deb/sbx_VERSION_ARCH.deb
deb:
	@scripts/deb.sh

lint: deps
	@scripts/lint.sh build/dev

ci:
	@bash .ci/run

bench:
	@bench/run

# kill -9 of the server across 1000 mixed operations, with faults (tests/torture; CI runs a
# short form as the CTest torture/short). ARGS adds flags, e.g. ARGS="--seed 42".
torture: deps
	@cmake --preset dev >/dev/null
	@cmake --build build/dev
	@python3 tests/torture/torture.py build/dev/sbx $(ARGS)

# 1000 sandboxes under exec and file traffic for 10 minutes, the release build: the server's
# RSS and fds must stay flat (tests/torture/soak.py; CTest torture/soak-short is a short form)
soak: build
	@python3 tests/torture/soak.py build/release/sbx $(ARGS)

# The desktop image for the docker provider and OCI sandboxes (docs/desktop.md)
desktop-image:
	@images/desktop/build.sh -o build/sbx-desktop.tar

# OSWorld's VM as an image: user `user` with sudo, gnome-terminal, LibreOffice... (docs/desktop.md)
osworld-image:
	@images/desktop/build.sh --osworld -o build/sbx-osworld.tar

# sbx's container images for a cluster (docs/deploy-kubernetes.md): build/images/sbx-execd.tar
# (sbx-execd:VERSION) and build/images/sbx.tar (sbx:VERSION, mmdebstrap: root), from the
# release build. ARGS adds flags, e.g. ARGS="--prefix registry.example.com/sbx/".
images: build
	@deploy/images/build.sh --bin-dir build/release -o build/images $(ARGS) all

clean:
	rm -rf build
