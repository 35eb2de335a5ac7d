# Nudge — build, test and run locally. `make help` lists the targets.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

GO          ?= go
FUNCTIONS   := $(notdir $(wildcard functions/*))
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
NUDGE       := build/nudge
FN          ?=
EVENT       ?= $(if $(filter enqueue,$(FN)),events/scheduler.json,events/sqs-batch.json)
DEMO_FLAGS  ?=
CHAOS_FLAGS ?=
FAULT       ?=
FUZZTIME    ?= 30s

# The CDK CLI and cfn-guard, pinned in infra/cli/package-lock.json, installed into .local/cdk.
CDK_DIR     := .local/cdk
CDK         := $(CDK_DIR)/node_modules/.bin/cdk
CFN_GUARD   := $(CDK_DIR)/node_modules/@cdklabs/cdk-validator-cfnguard/bin/ubuntu/$(shell uname -m)/cfn-guard
GUARD_RULES := $(CDK_DIR)/node_modules/@cdklabs/cdk-validator-cfnguard/rules/control-tower/cfn-guard
export CDK_DISABLE_VERSION_CHECK := 1
export CDK_DISABLE_CLI_TELEMETRY := 1
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
STAGE       ?= dev
STACK       := Nudge-$(STAGE)
SNAPSHOT    := infra/testdata/$(STACK).template.json
CDK_ARGS    ?=
CDK_FLAGS   := --no-notices -c stage=$(STAGE) $(if $(PROFILE),--profile $(PROFILE)) $(CDK_ARGS)

.PHONY: help serve demo chaos build build-local test test-infra unit dates lint invoke bench fuzz clean stop-standins cdk synth diff snapshot check-infra deploy destroy

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

build: ## one linux/arm64 bootstrap per function under build/<fn>/ (what cdk synth builds too)
	sh infra/build-functions.sh build
	@for fn in $(FUNCTIONS); do echo "build/$$fn/bootstrap $$(stat -c %s build/$$fn/bootstrap) bytes"; done

build-local: ## the nudge CLI and host-architecture bootstraps for the emulator
	$(GO) build -o $(NUDGE) ./cmd/nudge
	NUDGE_GOOS=$$($(GO) env GOHOSTOS) NUDGE_GOARCH=$$($(GO) env GOHOSTARCH) sh infra/build-functions.sh build/local

test: lint build build-local test-infra ## everything a contributor must run: lint, build, unit and integration tests against the stand-ins, the stack's tests and checks, the fast tests on other dates
	NUDGE_REQUIRE_STANDINS=1 $(NUDGE) local exec -- $(GO) test -race -count=1 -timeout 10m ./...
	$(MAKE) --no-print-directory dates

test-infra: build check-infra ## the CDK stack: invariants, cdk-nag, snapshot (infra/), then cfn-guard
	cd infra && NUDGE_REQUIRE_CDK=1 $(GO) test -count=1 -timeout 10m ./...

unit: ## the fast tests only (integration tests skip without the stand-ins)
	$(GO) test ./...

dates: ## the fast tests with the wall clock a year back, a year on and ten years on: no verdict may depend on today's date
	GO=$(GO) .ci/shifted-clock -1y +1y +10y

lint: ## gofmt, go vet, staticcheck (both modules)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	cd infra && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./...

serve: build-local ## the whole system locally with nothing scheduled, the intake API on a local function URL, until Ctrl-C
	$(NUDGE) local serve

demo: build-local ## run the whole system locally with faults, then print the summary (DEMO_FLAGS="--reminders 1000")
	$(NUDGE) local demo $(DEMO_FLAGS)

chaos: build-local ## the system under load and faults: 10,000 reminders, consumer kills, cut enqueue runs (CHAOS_FLAGS="--reminders 100000")
	$(NUDGE) local chaos $(CHAOS_FLAGS)

invoke: build-local ## run the function EVENT is for (or FN) under the Lambda emulator against the stand-ins (FAULT="rem-185=500")
	$(NUDGE) local invoke --event $(EVENT) $(if $(FN),--function $(FN)) --fault "$(FAULT)"

bench: build-local ## benchmarks, in-memory and against the stand-ins
	NUDGE_REQUIRE_STANDINS=1 $(NUDGE) local exec -- $(GO) test -count=1 -run '^$$' -bench . -benchmem ./...

fuzz: ## fuzz the message decoder, the consumer's event decoding, the import parser, the intake API, and the local-time, send-window and recurrence-rule parsers, FUZZTIME each (30s, or 1000000x)
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 10s ./internal/message
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeEvent$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 10s ./internal/consumer
	$(GO) test -run '^$$' -fuzz '^FuzzReadRows$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 10s ./pkg/schedule
	$(GO) test -run '^$$' -fuzz '^FuzzFunctionURL$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 10s ./pkg/intake
	$(GO) test -run '^$$' -fuzz '^FuzzParseWall$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 10s ./pkg/localtime
	$(GO) test -run '^$$' -fuzz '^FuzzParseWindowSpec$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 10s ./pkg/localtime
	$(GO) test -run '^$$' -fuzz '^FuzzLoadZone$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 10s ./pkg/localtime
	$(GO) test -run '^$$' -fuzz '^FuzzRule$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 10s ./pkg/recur

cdk: $(CDK) ## install the pinned CDK CLI and cfn-guard into .local/cdk
$(CDK): infra/cli/package.json infra/cli/package-lock.json
	mkdir -p $(CDK_DIR)
	cp infra/cli/package.json infra/cli/package-lock.json $(CDK_DIR)/
	cd $(CDK_DIR) && npm ci --no-audit --no-fund --legacy-peer-deps --loglevel=error
	touch $(CDK)

synth: $(CDK) ## synthesize the STAGE stack (dev) into cdk.out (cdk.json's app builds the functions)
	$(CDK) synth $(CDK_FLAGS) --quiet $(STACK)

diff: synth ## offline: what the synthesized stack changes against the committed snapshot
	$(CDK) diff --no-notices --app cdk.out --template $(SNAPSHOT) --fail $(STACK)

snapshot: synth ## update the committed template snapshot from the synthesized stack
	cp cdk.out/$(STACK).template.json $(SNAPSHOT)

check-infra: synth ## the synthesized template through cfn-guard with the AWS Control Tower rules
	@rules=$$(find $(GUARD_RULES) -name '*.guard' | grep -v -F -f <(grep -v '^#' infra/guard-exceptions.txt | cut -d' ' -f1 | grep .) | sort); \
	echo "cfn-guard: $$(echo "$$rules" | wc -l) Control Tower rules (less the explained ones in infra/guard-exceptions.txt) on cdk.out/$(STACK).template.json"; \
	$(CFN_GUARD) validate --data cdk.out/$(STACK).template.json $$(printf -- '--rules %s ' $$rules) --show-summary fail --output-format single-line-summary

deploy: $(CDK) ## deploy STAGE with your AWS profile/region: make deploy [WEBHOOK_URL=https://… WEBHOOK_SECRET=name-or-arn] (first deploy; later ones keep them) [WEBHOOK_SECRET_KEY=kms-key-arn] [STAGE=prod CDK_ARGS="-c alarmEmail=…"] [PROFILE=…]
	$(CDK) deploy $(CDK_FLAGS) $(STACK) $(if $(WEBHOOK_URL),--parameters 'WebhookUrl=$(WEBHOOK_URL)') \
	  $(if $(WEBHOOK_SECRET),--parameters 'WebhookSigningRef=$(WEBHOOK_SECRET)') $(if $(WEBHOOK_SECRET_KEY),--parameters WebhookSigningKmsArn=$(WEBHOOK_SECRET_KEY))

destroy: $(CDK) ## delete the STAGE stack (prod keeps its table and queues)
	$(CDK) destroy $(CDK_FLAGS) $(STACK)

clean: ## remove build output (keeps the installed stand-ins in .local)
	rm -rf build cdk.out
