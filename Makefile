# Baton. `make` builds and installs into ./install; `make demo` is the README's first command,
# `make test` the second (what CI runs).
PREFIX ?= $(CURDIR)/install
CARGO ?= cargo
# Follows CARGO_TARGET_DIR when set, as cargo does.
TARGET_DIR := $(or $(CARGO_TARGET_DIR),$(CURDIR)/target)/release
NP ?= 4

.PHONY: all deps build install demo test test-rust test-c lint clean

all: install

deps:
	@scripts/deps.sh

build: deps
	$(CARGO) build --release --workspace --bins --lib

install: build
	scripts/install.sh $(TARGET_DIR) $(PREFIX)

demo: install
	scripts/demo.sh $(PREFIX)

test: install
	scripts/test.sh $(PREFIX)

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

clean:
	$(CARGO) clean
	rm -rf install build
