# agentauth — every entry point. `make run` and `make test` set up what they
# need on a fresh machine (Go 1.26, Node 20 and, for the browser tests,
# Debian's chromium are the only prerequisites; chromium is installed with
# apt-get when missing and we are root).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO            ?= go
HOME_DIR      ?= $(or $(AGENTAUTH_HOME),.agentauth)
BUNDLE        ?= examples/bundle
ADDR          ?= 127.0.0.1:8080
PROVIDER_DIR  := test/e2e/provider
PROVIDER_PORT ?= 9090
# The scripted model (not a language model) for examples/bundle's Model;
# MODEL_ADDR= starts none.
MODEL_ADDR    ?= 127.0.0.1:9292
BIN           := bin/agentauth
GOTEST_FLAGS  ?= -race -count=1 -timeout 30m

.PHONY: help
help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-18s %s\n", $$1, $$2}'

.PHONY: check-tools
check-tools:
	@command -v $(GO) >/dev/null || { echo "Go 1.26 is required (https://go.dev/dl/)"; exit 1; }
	@$(GO) version | grep -Eq 'go1\.(2[6-9]|[3-9][0-9])' || { echo "Go 1.26 or newer is required, found: $$($(GO) version)"; exit 1; }
	@command -v node >/dev/null || { echo "Node.js 20.19+ is required for the demo OpenID provider"; exit 1; }

$(PROVIDER_DIR)/node_modules/.installed: $(PROVIDER_DIR)/package-lock.json
	@echo "installing the demo OpenID provider (npm ci, pinned by package-lock.json)"
	cd $(PROVIDER_DIR) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

.PHONY: provider-deps
provider-deps: check-tools $(PROVIDER_DIR)/node_modules/.installed ## install the pinned oidc-provider

.PHONY: browser-deps
browser-deps: ## install Debian's chromium for the browser tests when missing
	@if [ -x "$${CHROMIUM:-/usr/bin/chromium}" ]; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then echo "chromium is missing: run 'sudo apt-get install -y chromium' (or set CHROMIUM=/path/to/chromium)"; exit 1; fi; \
	echo "installing chromium (apt-get)"; \
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null

.PHONY: e2e-deps
e2e-deps: provider-deps browser-deps mcp-client-deps axe-deps ## everything the end-to-end tests need

# axe-core (npm, pinned by test/e2e/axe/package-lock.json): the accessibility
# engine test/e2e/console_test.go injects into every console page.
AXE_DIR := test/e2e/axe

$(AXE_DIR)/node_modules/.installed: $(AXE_DIR)/package-lock.json
	@echo "installing axe-core (npm ci, pinned by package-lock.json)"
	cd $(AXE_DIR) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

.PHONY: axe-deps
axe-deps: check-tools $(AXE_DIR)/node_modules/.installed ## install the pinned axe-core the console's end-to-end test injects

# The independent MCP clients test/e2e/mcp_test.go drives against /mcp:
# the official Python SDK (PyPI, pinned; its own dependencies float like
# fakellm's) and the official TypeScript SDK (npm, pinned by
# test/e2e/mcpclients/package-lock.json).
MCP_PY_VERSION := 2.3.0
MCP_PY_VENV    := .tools/mcp-python-$(MCP_PY_VERSION)
MCPCLIENTS_DIR := test/e2e/mcpclients

$(MCP_PY_VENV)/.installed:
	@echo "installing the MCP Python SDK $(MCP_PY_VERSION) into $(MCP_PY_VENV) (pip)"
	python3 -m venv $(MCP_PY_VENV)
	$(MCP_PY_VENV)/bin/pip install -q --disable-pip-version-check mcp==$(MCP_PY_VERSION)
	@touch $@

$(MCPCLIENTS_DIR)/node_modules/.installed: $(MCPCLIENTS_DIR)/package-lock.json
	@echo "installing the MCP TypeScript SDK (npm ci, pinned by package-lock.json)"
	cd $(MCPCLIENTS_DIR) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

.PHONY: mcp-client-deps
mcp-client-deps: check-tools $(MCP_PY_VENV)/.installed $(MCPCLIENTS_DIR)/node_modules/.installed ## install the pinned MCP Python and TypeScript SDKs the /mcp end-to-end test drives

# fakellm (PyPI, pinned; its own dependencies float like MiniStack's): an
# OpenAI-compatible mock server written by others, which the openai model
# adapter is checked against once (shared/turn/model/openai, skipped when
# missing; AGENTAUTH_REQUIRE_FAKELLM=1 makes missing a failure).
FAKELLM_VERSION := 0.3.5
FAKELLM_VENV    := .tools/fakellm-$(FAKELLM_VERSION)

$(FAKELLM_VENV)/bin/fakellm:
	@echo "installing fakellm $(FAKELLM_VERSION) into $(FAKELLM_VENV) (pip)"
	python3 -m venv $(FAKELLM_VENV)
	$(FAKELLM_VENV)/bin/pip install -q --disable-pip-version-check fakellm==$(FAKELLM_VERSION)

.PHONY: model-mock-deps
model-mock-deps: $(FAKELLM_VENV)/bin/fakellm ## install fakellm, the independent OpenAI-compatible mock the openai adapter is checked against

# The client SDKs (sdk/, sdk/TESTING.md): each ci.sh installs its pinned
# dependencies (the Python SDK into SDK_PY_VENV, which test/e2e's TestSDKs
# runs the Python suite with) and runs its checks and unit tests; the
# integration suites run under TestSDKs (test/e2e, against agentauth
# serve) and TestDeployedSDKs (test/e2eaws, against the deployed stack).
SDK_PY_VENV := .tools/sdk-python

.PHONY: sdk-check
sdk-check: check-tools ## install each SDK's dependencies and run its checks and unit tests (sdk/python/ci.sh into SDK_PY_VENV, sdk/typescript/ci.sh)
	sdk/python/ci.sh $(CURDIR)/$(SDK_PY_VENV)
	sdk/typescript/ci.sh

.PHONY: test-sdk
test-sdk: e2e-deps sdk-check ## the SDKs' integration suites against agentauth serve, one after the other (TestSDKs in test/e2e)
	E2E_REQUIRE=1 $(GO) test -count=1 -v -timeout 20m -run TestSDKs ./test/e2e

# A cold Go cache makes the first build of cmd/agentauth take minutes (about
# 2.5 on 2 cores), so it says so before and how long it took after.
.PHONY: build
build: check-tools ## build bin/agentauth
	@echo "building agentauth (first build takes a few minutes)…"
	@start=$$(date +%s); $(GO) build -o $(BIN) ./cmd/agentauth; \
	  echo "built $(BIN) in $$(( $$(date +%s) - start )) s"

.PHONY: run
run: provider-deps build ## run agentauth + the demo OpenID provider locally (the banner prints once serve answers)
	@BIN=$(BIN) HOME_DIR='$(HOME_DIR)' BUNDLE='$(BUNDLE)' ADDR=$(ADDR) \
	  PROVIDER_DIR=$(PROVIDER_DIR) PROVIDER_PORT=$(PROVIDER_PORT) MODEL_ADDR=$(MODEL_ADDR) scripts/run.sh

.PHONY: reset
reset: ## delete make run's demo home (HOME_DIR, default .agentauth) after listing what goes; refuses any other directory
	@HOME_DIR='$(HOME_DIR)' scripts/reset.sh

TOOLS_BIN     := $(CURDIR)/.tools/bin
ACTIONLINT    := $(TOOLS_BIN)/actionlint
LAMBDA_ARCH   ?= $(shell $(GO) env GOARCH)
LAMBDAS       := gettoken callback tools turn
# LAMBDA_TAGS: more build tags (deploy-local: faultinject, the turn
# function's crash injection); BUNDLE_OVERLAY: a directory whose YAML files
# are copied over the bundle's (deploy-local: localstack/bundle).
LAMBDA_TAGS   ?=
BUNDLE_OVERLAY ?=
AWS_LOCAL_ENV := AWS_ENDPOINT_URL=http://127.0.0.1:4566 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1

$(ACTIONLINT):
	GOBIN=$(TOOLS_BIN) $(GO) install github.com/rhysd/actionlint/cmd/actionlint@v1.7.7

.PHONY: lint
lint: $(ACTIONLINT) ## gofmt, go vet, actionlint
	@out=$$(gofmt -l $$(git ls-files '*.go')); [ -z "$$out" ] || { echo "gofmt needed:"; echo "$$out"; exit 1; }
	cd infra && $(GO) vet ./...
	cd localstack && $(GO) vet ./... && $(GO) vet -tags deploylocal ./...
	$(GO) vet ./...
	$(GO) vet -tags faultinject ./shared/app ./shared/edge/lambdaentry
	$(GO) vet -tags integration ./shared/... && $(GO) vet -tags e2eaws ./test/e2eaws
	$(ACTIONLINT) .github/workflows/*.yml

.PHONY: emulator-up
emulator-up: ## start MiniStack (pinned, project venv) on 127.0.0.1:4566
	localstack/ministack.sh up

.PHONY: emulator-down
emulator-down: ## stop MiniStack
	localstack/ministack.sh down

.PHONY: test-integration
test-integration: emulator-up ## adapter tests against the emulator's AWS APIs
	$(AWS_LOCAL_ENV) AGENTAUTH_REQUIRE_EMULATOR=1 $(GO) test -tags integration -count=1 -timeout 20m ./shared/...

.PHONY: test-localstack
test-localstack: ## the adapter suites against LocalStack (needs Docker and LOCALSTACK_AUTH_TOKEN)
	@[ -n "$${LOCALSTACK_AUTH_TOKEN:-}" ] || { echo "LocalStack needs LOCALSTACK_AUTH_TOKEN (and Docker); agentauth's own tests use MiniStack: make test-integration"; exit 1; }
	@docker info >/dev/null 2>&1 || { echo "LocalStack needs a running Docker engine"; exit 1; }
	docker compose -f localstack/docker-compose.yml up -d --wait
	AWS_ENDPOINT_URL=http://127.0.0.1:4567 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1 AGENTAUTH_REQUIRE_EMULATOR=1 \
	  $(GO) test -tags integration -count=1 -timeout 20m ./shared/...

.PHONY: bench-aws
bench-aws: emulator-up ## AWS calls per operation (SDK middleware counts) on the emulator
	@$(AWS_LOCAL_ENV) AGENTAUTH_REQUIRE_EMULATOR=1 $(GO) test -tags integration -count=1 -v -run TestAWSBackendsFlowAndCallCounts ./shared/edge/lambdaentry | grep -E 'AWS calls|^(ok|FAIL|---)'

.PHONY: bench-turns
bench-turns: emulator-up ## a turn step's overhead (no model or tool time): in-process on the file store, and on DynamoDB on the emulator with calls and capacity per step
	$(GO) test -run '^$$' -bench BenchmarkStepOverhead -benchmem -count 3 ./shared/turn/engine
	$(AWS_LOCAL_ENV) AGENTAUTH_REQUIRE_EMULATOR=1 $(GO) test -tags integration -run '^$$' -bench BenchmarkTurnStepDynamoDB -benchtime 200x -count 3 ./shared/app

.PHONY: bench-console
bench-console: emulator-up ## the console's list pages (100,000 grants, 10,000 instances): on the file stores (seeded once under the temp dir), then on the emulator (AGENTAUTH_BENCH_GRANTS/AGENTAUTH_BENCH_INSTANCES lower its counts)
	$(GO) test -run '^$$' -bench 'BenchmarkQueryGrants100k' -benchtime 50x ./shared/local/filestore
	$(GO) test -run '^$$' -bench 'BenchmarkQueryInstances10k' -benchtime 50x ./shared/local/turnfile
	$(AWS_LOCAL_ENV) AGENTAUTH_REQUIRE_EMULATOR=1 $(GO) test -tags integration -run '^$$' -bench 'BenchmarkQuery(Grants100k|Instances10k)' -benchtime 3x -timeout 30m ./shared/aws/dynamostore

.PHONY: bench-changesets
bench-changesets: emulator-up ## a changeset's commit on a 100-file bundle: the local repository, and S3 + DynamoDB on the emulator with calls per commit
	$(GO) test -run '^$$' -bench BenchmarkCommit100Files -benchtime 100x -count 3 ./shared/local/bundlerepo
	$(AWS_LOCAL_ENV) AGENTAUTH_REQUIRE_EMULATOR=1 $(GO) test -tags integration -run '^$$' -bench BenchmarkCommit100FilesOnEmulator -benchtime 100x -count 3 ./shared/aws/gitstore

.PHONY: build-lambdas
build-lambdas: ## static Lambda binaries + bundle in build/lambda/<fn>/ (LAMBDA_ARCH=arm64|amd64, default: this host)
	@for fn in $(LAMBDAS); do \
	  rm -rf build/lambda/$$fn && mkdir -p build/lambda/$$fn; \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$(LAMBDA_ARCH) $(GO) build -tags 'lambda.norpc $(LAMBDA_TAGS)' -trimpath -ldflags '-s -w' -o build/lambda/$$fn/bootstrap ./functions/$$fn; \
	  cp -R $(BUNDLE) build/lambda/$$fn/bundle; \
	  if [ -n "$(BUNDLE_OVERLAY)" ]; then cp $(BUNDLE_OVERLAY)/*.yaml build/lambda/$$fn/bundle/; fi; \
	  echo "build/lambda/$$fn: $$(du -h build/lambda/$$fn/bootstrap | cut -f1) ($(LAMBDA_ARCH)$(if $(LAMBDA_TAGS), tags $(LAMBDA_TAGS),))"; \
	done

# The CDK CLI is pinned by infra/package-lock.json (aws-cdk 2.1148.1).
CDK           := $(CURDIR)/infra/node_modules/.bin/cdk
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20

.PHONY: test
test: check-tools e2e-deps model-mock-deps sdk-check lint ## everything: unit, fuzz seeds, the SDKs' checks, local e2e (the SDKs' integration suites too), CDK assertions, AWS adapters on MiniStack, the deployed stack end to end
	AGENTAUTH_REQUIRE_FAKELLM=1 $(GO) test $(GOTEST_FLAGS) $$($(GO) list ./... | grep -v /test/)
	$(GO) test -tags faultinject -count=1 -run Fault ./shared/app
	E2E_REQUIRE=1 $(GO) test $(GOTEST_FLAGS) -p 1 ./test/...
	cd infra && $(GO) test -count=1 -timeout 20m ./...
	$(MAKE) test-integration
	$(MAKE) test-deploy-local
	$(MAKE) test-e2e-aws

infra/node_modules/.installed: infra/package-lock.json
	cd infra && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# CDK_ARGS: more `cdk deploy` arguments, e.g. the tools function's context
# (docs/deploy.md): CDK_ARGS='-c jwksUrl=https://… -c jwtIssuer=… -c jwtAudience=…'.
CDK_ARGS      ?=

.PHONY: deploy
deploy: check-tools infra/node_modules/.installed ## deploy to the AWS account of the current credentials (run build-lambdas LAMBDA_ARCH=arm64 first; CDK_ARGS=…)
	@[ -x build/lambda/gettoken/bootstrap ] || { echo "build the functions first: make build-lambdas LAMBDA_ARCH=arm64"; exit 1; }
	cd infra && $(CDK) deploy --require-approval never -c arch=$$( [ "$(LAMBDA_ARCH)" = amd64 ] && echo x86_64 || echo arm64 ) $(CDK_ARGS)

.PHONY: synth
synth: check-tools infra/node_modules/.installed build-lambdas ## synthesize the CDK app (infra/) with the pinned CDK CLI
	cd infra && $(CDK) synth --quiet

.PHONY: test-unit
test-unit: ## unit tests only (no browser, no provider)
	$(GO) test -short -count=1 $$($(GO) list ./... | grep -v /test/e2e)

# FUZZPKG narrows the search, e.g. FUZZPKG=./shared/edge/... (scripts/fuzz.sh).
FUZZTIME      ?= 30s
FUZZPKG       ?= ./...

.PHONY: fuzz
fuzz: ## run every fuzz target (found with go test -list) for FUZZTIME each (default 30s; FUZZPKG=./shared/...)
	GO=$(GO) FUZZTIME=$(FUZZTIME) FUZZPKG='$(FUZZPKG)' scripts/fuzz.sh

.PHONY: bench
bench: build ## benchmarks: the warm ready path in-process and over loopback
	$(GO) test -run '^$$' -bench 'BenchmarkGetAccessTokenReady' -benchmem -count 5 ./shared/oauth
	$(BIN) bench --duration 10s --concurrency 16

# The soak (test/soak, README.md "Performance"): agentauth serve on a fresh
# temporary home (5-minute retention windows, --debug-addr on loopback)
# under a steady mixed load on 127.0.0.1 for SOAK_DURATION, then a minute
# idle; SOAK_ARGS passes more flags (bin/soak -h lists them). The files
# under the home are judged from SOAK_DURATION=1h on.
SOAK_DURATION ?= 10m
SOAK_ARGS     ?=

.PHONY: soak
soak: ## soak agentauth serve on loopback for SOAK_DURATION (default 10m; SOAK_ARGS=…): a sample line every 15 s (goroutines, heap, files…), slopes per hour, idle levels; non-zero when not flat, with pprof's top stacks
	$(GO) build -o $(BIN) ./cmd/agentauth
	$(GO) build -o bin/soak ./test/soak
	bin/soak --bin $(BIN) --duration $(SOAK_DURATION) $(SOAK_ARGS)

.PHONY: clean
clean: ## remove build output (keeps .agentauth: make reset deletes it)
	rm -rf bin

# The real stack on the local emulator with the real CDK CLI (localstack/README.md).
# MINISTACK_PORT selects the emulator (default 4566; another port starts a
# separate one, with its own state under .tools/ministack-run-<port>).
MINISTACK_PORT ?= 4566
HOST_ARCH     := $(shell $(GO) env GOARCH)
# The local stack has the tools function, for jwttest's issuer
# (shared/testkit/jwttest): test/e2eaws serves its JWKS on
# 127.0.0.1:E2E_JWKS_PORT while it runs (the function fetches it only when
# a request comes, so nothing needs to listen at deploy time). Seam routes
# on; 3 calls an hour per (principal, tool), which the rate-limit test
# exhausts.
E2E_JWKS_PORT ?= 4591
LOCAL_TOOLS_CONTEXT := -c jwksUrl=http://127.0.0.1:$(E2E_JWKS_PORT)/jwks \
  -c jwtIssuer=https://issuer.agentauth.test -c jwtAudience=agentauth-tools \
  -c toolhooksSeam=1 -c toolRateLimit=3/h
# The local stack's turn function: a 10 s timeout (so the queue's
# visibility timeout, six times it, returns a crashed batch within a
# minute), and the Bedrock model of localstack/bundle/agents.yaml, which
# MiniStack forwards to the scripted model (localstack/ministack.sh).
LOCAL_TURNS_CONTEXT := -c turns=1 -c turnTimeout=10 -c bedrockModels=anthropic.claude-3-haiku-20240307-v1:0
# The local stack's operator console, signing in at the demo provider where
# examples/bundle expects it (127.0.0.1:9090) as its agentauth-console
# client; deploy-local seeds the secret <SecretPrefix>console-oidc.
LOCAL_CONSOLE_CONTEXT := -c consoleIssuer=http://127.0.0.1:9090 -c consoleClientId=agentauth-console \
  -c consoleClientSecretRef=console-oidc/clientSecret

.PHONY: deploy-local
deploy-local: check-tools infra/node_modules/.installed ## deploy the CDK stack to MiniStack (host-arch functions, pinned CDK CLI, tools function for E2E_JWKS_PORT); outputs in .tools/deploy-local/
	MINISTACK_PORT=$(MINISTACK_PORT) localstack/ministack.sh up
	$(MAKE) --no-print-directory build-lambdas LAMBDA_ARCH=$(HOST_ARCH) LAMBDA_TAGS=faultinject BUNDLE_OVERLAY=localstack/bundle
	MINISTACK_PORT=$(MINISTACK_PORT) localstack/deploy-local.sh deploy $(LOCAL_TOOLS_CONTEXT) $(LOCAL_TURNS_CONTEXT) $(LOCAL_CONSOLE_CONTEXT)

.PHONY: test-deploy-local
test-deploy-local: deploy-local ## deploy-local, then check the deployed stack and call it through the emulator's API Gateway
	cd localstack && AWS_ENDPOINT_URL=http://127.0.0.1:$(MINISTACK_PORT) \
	  AGENTAUTH_DEPLOY_OUTPUTS=$(CURDIR)/.tools/deploy-local$(if $(filter 4566,$(MINISTACK_PORT)),,-$(MINISTACK_PORT))/outputs.json \
	  $(GO) test -tags deploylocal -count=1 -v ./deploylocal

.PHONY: test-e2e-aws
test-e2e-aws: e2e-deps sdk-check deploy-local ## deploy-local, then the browser flow, queue, refresh, tools function and leak scan through the emulator's API Gateway (test/e2eaws)
	AWS_ENDPOINT_URL=http://127.0.0.1:$(MINISTACK_PORT) \
	  AGENTAUTH_DEPLOY_OUTPUTS=$(CURDIR)/.tools/deploy-local$(if $(filter 4566,$(MINISTACK_PORT)),,-$(MINISTACK_PORT))/outputs.json \
	  AGENTAUTH_REQUIRE_EMULATOR=1 E2E_REQUIRE=1 \
	  $(GO) test -tags e2eaws -count=1 -v -timeout 15m ./test/e2eaws/

.PHONY: destroy-local
destroy-local: check-tools infra/node_modules/.installed ## delete the local stack and what it retains (table, key, secrets)
	MINISTACK_PORT=$(MINISTACK_PORT) localstack/deploy-local.sh destroy
