# The two commands of the README:
#   make demo   - play the narrated demo on the embedded default
#   make test   - the whole test suite (what CI runs through .ci/run)
GO ?= go

.PHONY: all build demo test check vet fmt-check services bench bench-kube fuzz

all: build

build:
	$(GO) build -o bin/sparecap ./cmd/sparecap

demo:
	$(GO) run ./cmd/sparecap demo

# test installs or starts what the tests need, then runs every test:
# unit, property, fake-clock, conformance (SQLite and PostgreSQL), API,
# fuzz seed corpora and end-to-end tests of the real binary.
test: services check
	$(GO) test -count=1 -race -timeout 15m ./...

check: fmt-check vet

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "not gofmt-clean:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

# services makes sure PostgreSQL is up for the conformance and end-to-end
# tests, Debian's chromium is installed for the browser tests, and etcd and
# a kube-apiserver (built once, cached outside the checkout) are there for
# the Kubernetes integration tests; it fails loudly rather than letting
# those tests be skipped.
services:
	@scripts/ensure-postgres.sh
	@scripts/ensure-chromium.sh
	@scripts/ensure-kube.sh

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./internal/allocator/ ./internal/billing/

# bench-kube runs the Kubernetes benchmarks against a real API server (about
# two minutes): notice fan-out against kubectl's drain, and the capacity
# hand-over. See docs/perf.md.
bench-kube: services
	$(GO) test -run '^$$' -bench . -benchtime 1x ./internal/kube/

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzDecodeCreate -fuzztime 30s ./internal/api/
	$(GO) test -run '^$$' -fuzz FuzzDecodeUpdate -fuzztime 30s ./internal/api/
	$(GO) test -run '^$$' -fuzz FuzzDecodeAdmin -fuzztime 30s ./internal/api/
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 30s ./internal/fleet/
