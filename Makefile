# Switchyard. `make run` starts the daemon, `make test` runs every test with
# the race detector.

GO      ?= go
BIN     := bin/switchyard
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
ARGS    ?=

.PHONY: build run test bench lint clean

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/switchyard

run: build
	./$(BIN) serve $(ARGS)

test: lint
	@if [ -z "$$SWITCHYARD_TEST_POSTGRES_DSN" ] && ! command -v initdb >/dev/null && \
	    ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
	  echo "PostgreSQL suite skipped: no PostgreSQL server programs found. Install them (Debian: apt-get install postgresql)"; \
	  echo "or set SWITCHYARD_TEST_POSTGRES_DSN to a server where the user may create databases, to run it."; \
	fi
	$(GO) test -race -count=1 -timeout 20m ./...

# Benchmarks print their figures as ratios against a baseline measured in the
# same run; see bench/doc.go. The GitHub intake benchmark also runs a Node
# peer (bench/peer), installed here from its lock file when node and npm are
# on PATH; without them it says it skipped the peer.
bench:
	@if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then \
		npm ci --prefix bench/peer --no-audit --no-fund --loglevel=error || echo "bench: npm ci in bench/peer failed: the Node peer is skipped"; \
	else \
		echo "bench: node and npm are not on PATH: the Node peer is skipped (install Node.js 20 or later to compare with it)"; \
	fi
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m ./bench/

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

clean:
	rm -rf bin
