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
	$(GO) test -race -count=1 -timeout 15m ./...

# Benchmarks print their figures as ratios against a baseline measured in the
# same run; see bench/README.md.
bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m ./bench/

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

clean:
	rm -rf bin
