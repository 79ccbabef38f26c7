# toolgate: build, test, bench, lint. `make test` is what CI runs.
GO       ?= go
BIN      ?= bin/toolgate
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X github.com/toolgate/toolgate.Version=$(VERSION)

.PHONY: all build test lint fmt-check vet gotest policy-test conformance bench fuzz clean browser

all: build

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/toolgate

# test: formatting, vet, the Go tests with the race detector (the approvals
# page's browser test included: Chromium is installed first and its test may
# not skip), the Rego unit tests of the default policy with its coverage
# floor, the reference conformance suites.
test: browser fmt-check vet gotest policy-test conformance
test: export TOOLGATE_REQUIRE_BROWSER = 1

# browser: headless Chromium (Debian's package) for server/'s browser test.
browser:
	bash scripts/install-chromium.sh

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

gotest:
	$(GO) test -race -count=1 ./...

policy-test: build
	$(BIN) test policies/ --coverage --threshold 90

conformance: build
	$(BIN) conformance run conformance/suites/

lint: fmt-check vet

bench:
	$(GO) test -run '^$$' -bench . -benchmem . ./engine/... ./state/... ./audit/... ./bundles/... ./conformance/...

# fuzz: a short run of each fuzz target (make fuzz FUZZTIME=5m for longer).
# The seed corpora in testdata/fuzz/ run as ordinary tests in `make test`.
FUZZTIME ?= 30s
FUZZ_TARGETS := schema:FuzzDecodeRequest engine/scan:FuzzDecode engine/scan:FuzzMatch \
	engine/scan:FuzzProvenance engine/shell:FuzzNormalize engine/shell:FuzzFragments audit:FuzzDecodeEntry \
	state:FuzzFingerprint triage:FuzzParseAnswer
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "fuzz $$fn ./$$pkg"; \
		$(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) ./$$pkg/ || exit 1; \
	done

clean:
	rm -rf bin
