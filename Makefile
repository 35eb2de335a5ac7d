# Nudge — build, test and run locally. `make help` lists the targets.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

GO          ?= go
FUNCTIONS   := $(notdir $(wildcard functions/*))
LAMBDA_ENV  := CGO_ENABLED=0 GOOS=linux GOARCH=arm64
BUILD_FLAGS := -tags lambda.norpc -trimpath -buildvcs=false -ldflags='-s -w'
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
NUDGE       := build/nudge
FN          ?= consumer
EVENT       ?= events/sqs-batch.json
FAULT       ?=
FUZZTIME    ?= 30s

.PHONY: help build build-local test unit lint invoke bench fuzz clean stop-standins

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

build: ## one linux/arm64 bootstrap per function under build/<fn>/
	@for fn in $(FUNCTIONS); do \
	  $(LAMBDA_ENV) $(GO) build $(BUILD_FLAGS) -o build/$$fn/bootstrap ./functions/$$fn; \
	  echo "build/$$fn/bootstrap $$(stat -c %s build/$$fn/bootstrap) bytes"; \
	done

build-local: ## the nudge CLI and host-architecture bootstraps for the emulator
	$(GO) build -o $(NUDGE) ./cmd/nudge
	@for fn in $(FUNCTIONS); do \
	  CGO_ENABLED=0 $(GO) build $(BUILD_FLAGS) -o build/local/$$fn/bootstrap ./functions/$$fn; \
	done

test: lint build build-local ## everything a contributor must run: lint, build, unit and integration tests against the stand-ins
	NUDGE_REQUIRE_STANDINS=1 $(NUDGE) local exec -- $(GO) test -race -count=1 -timeout 10m ./...

unit: ## the fast tests only (integration tests skip without the stand-ins)
	$(GO) test ./...

lint: ## gofmt, go vet, staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

invoke: build-local ## run FN under the Lambda emulator with EVENT against the stand-ins (FAULT="rem-185=500")
	$(NUDGE) local invoke --bootstrap build/local/$(FN)/bootstrap --event $(EVENT) --fault "$(FAULT)"

bench: build-local ## benchmarks, in-memory and against the stand-ins
	NUDGE_REQUIRE_STANDINS=1 $(NUDGE) local exec -- $(GO) test -count=1 -run '^$$' -bench . -benchmem ./...

fuzz: ## fuzz the message decoder for FUZZTIME
	$(GO) test -run '^$$' -fuzz FuzzDecode -fuzztime $(FUZZTIME) ./pkg/message

clean: ## remove build output (keeps the installed stand-ins in .local)
	rm -rf build cdk.out
