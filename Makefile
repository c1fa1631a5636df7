# The two commands of the README:
#   make demo   - play the narrated demo on the embedded default
#   make test   - the whole test suite (what CI runs through .ci/run)
GO ?= go

.PHONY: all build demo openapi test test-compat test-python test-queues check vet fmt-check services bench bench-kube bench-queues bench-slurm bench-scale bench-api fuzz

all: build

build:
	$(GO) build -o bin/sparecap ./cmd/sparecap

demo:
	$(GO) run ./cmd/sparecap demo

# openapi writes api/openapi.json from the server's route list and the
# wire types' comments (TestTheDocumentIsTheRouteList fails until it is).
openapi:
	$(GO) test ./internal/api -run '^TestTheDocumentIsTheRouteList$$' -count=1 -update

# test installs or starts what the tests need, then runs every test:
# unit, property, fake-clock, conformance (SQLite and PostgreSQL), API,
# fuzz seed corpora and end-to-end tests of the real binary, the
# Python SDK's tests (the system's python3, standard library only), and
# the work-queue recipes' tests.
test: services check test-python test-queues test-compat
	$(GO) test -count=1 -race -timeout 15m ./...

# test-compat diffs the API's OpenAPI document against its major
# version's baseline with oasdiff (api/compat, a module of its own, so
# oasdiff's dependencies stay out of the product's go.mod).
test-compat:
	$(GO) -C api/compat test -count=1 ./...

# test-queues runs the work-queue recipes of docs/queues.md (examples/queues,
# a module of its own, so the product's go.mod does not carry SQS, River and
# Asynq) as processes against real queues: goaws (an SQS-compatible server)
# in the test process, River on the test PostgreSQL, Asynq on the test Redis.
test-queues: services
	$(GO) -C examples/queues test -race -count=1 -timeout 10m ./...

# test-python's API client test runs bin/sparecap (built here) as a server.
test-python: build
	@scripts/ensure-python.sh
	SPARECAP_BIN=$(CURDIR)/bin/sparecap python3 -m unittest discover -s sdk/python/tests

check: fmt-check vet

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "not gofmt-clean:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...
	$(GO) -C examples/queues vet ./...
	$(GO) -C api/compat vet ./...

# services makes sure PostgreSQL is up for the conformance and end-to-end
# tests, Debian's chromium is installed for the browser tests, etcd,
# kube-apiserver and the mini cluster's components, and Kueue, JobSet and
# KubeRay with their manifests (built once, cached outside the checkout;
# see scripts/ensure-kube.sh) are there for the Kubernetes integration
# tests, Debian's Slurm daemons and munge for the Slurm driver's tests,
# Redis for the Asynq recipe's tests, and Debian's PyTorch for the
# Python examples' tests (internal/simjob); it fails loudly rather than
# letting those tests be skipped.
services:
	@scripts/ensure-postgres.sh
	@scripts/ensure-redis.sh
	@scripts/ensure-slurm.sh
	@scripts/ensure-chromium.sh
	@scripts/ensure-kube.sh
	@scripts/ensure-helm.sh
	@scripts/ensure-python.sh
	@scripts/ensure-torch.sh

# image builds the container image sparecap:dev from the Dockerfile. It
# needs a Docker engine (none runs on the project's test machines); see
# docs/deploy.md.
.PHONY: image
image:
	docker build -t sparecap:dev .

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./internal/allocator/ ./internal/billing/

# bench-slurm reclaims 50 Slurm nodes at once through sparecap and through
# an operator's drain-and-scancel loop, each on a real Slurm of its own
# (about a minute). See docs/perf.md.
bench-slurm:
	@scripts/ensure-slurm.sh
	$(GO) test -run '^$$' -bench BenchmarkSlurmNoticeFanOut -benchtime 1x -count 3 ./internal/slurm/

# bench-queues measures, in the mini cluster with Kueue, the time from a
# reclaim decision to the workload requeued by Kueue, through sparecap's
# admission check and through Kueue's own waitForPodsReady (about seven
# minutes: the second waits out Kueue's 5-minute recoveryTimeout). See
# docs/perf.md.
bench-queues: services
	$(GO) test -run '^$$' -bench RequeueAtNotice -benchtime 1x -timeout 30m ./internal/queues/kueuetest/

# bench-kube runs the Kubernetes benchmarks against a real API server (about
# three minutes): notice fan-out against kubectl's drain, the same with 100
# webhook endpoints that never answer against none, and the capacity
# hand-over. See docs/perf.md.
bench-kube: services
	$(GO) test -run '^$$' -bench . -benchtime 1x ./internal/kube/

# bench-api drives sparecap's API (the real binary, SQLite) and, in the
# same run with the same Go clients, the test environment's kube-apiserver
# (etcd 3.7, watch cache on): one object by name, a list of 50, a small
# write; 8 clients, 10 s each (about a minute and a half). See docs/perf.md.
# Pass flags with API_ARGS (e.g. API_ARGS='-duration 30s -clients 16').
API_ARGS ?=
bench-api: services
	$(GO) test -run '^$$' -bench BenchmarkAPIvsKube -benchtime 1x -timeout 20m ./internal/apibench/ -args $(API_ARGS)

# bench-scale runs the whole-system scale benchmark of the real binary
# (internal/scalebench) on SQLite, then on PostgreSQL (a fresh database,
# dropped afterwards): 96,000 GPUs, 1,000 clusters created by 16 clients,
# convergence, settled CPU, reads, a burst that reclaims 500 preemptible
# nodes. A SQLite run took 1.5-3 minutes on 2 cores in the last round
# (earlier rounds, slower binaries: 25-40). The PostgreSQL run
# goes ahead when the SQLite one reports a failure (a fleet that does not
# converge is a figure too); the target fails if either did. Pass other
# flags with SCALE_ARGS (e.g. SCALE_ARGS='-gpus 9600 -clusters 100 -burst
# 50') and a directory for the JSON figures with SCALE_OUT.
SCALE_ARGS ?=
SCALE_OUT ?=
bench-scale:
	@scripts/ensure-postgres.sh
	@status=0; \
	for db in sqlite postgres; do \
		$(GO) test -run '^$$' -bench BenchmarkServerScale -benchtime 1x -timeout 60m ./internal/scalebench/ \
			-args -db $$db $(if $(SCALE_OUT),-out $(SCALE_OUT)/scale-$$db.json) $(SCALE_ARGS) || status=1; \
	done; \
	exit $$status

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzDecodeCreate -fuzztime 30s ./internal/api/
	$(GO) test -run '^$$' -fuzz FuzzDecodeUpdate -fuzztime 30s ./internal/api/
	$(GO) test -run '^$$' -fuzz FuzzDecodeAdmin -fuzztime 30s ./internal/api/
	$(GO) test -run '^$$' -fuzz FuzzDecodeStrict -fuzztime 30s ./internal/api/
	$(GO) test -run '^$$' -fuzz FuzzDecodeTokenRequest -fuzztime 30s ./internal/api/
	$(GO) test -run '^$$' -fuzz FuzzEscape -fuzztime 30s ./internal/termsafe/
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 30s ./internal/fleet/
	$(GO) test -run '^$$' -fuzz FuzzParseConf -fuzztime 30s ./internal/slurm/
	$(GO) test -run '^$$' -fuzz FuzzCheckURL -fuzztime 30s ./internal/webhook/
