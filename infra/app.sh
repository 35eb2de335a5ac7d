#!/bin/sh
# The CDK app command (cdk.json): builds the CDK app (infra/) for this
# machine and runs it; the app builds the functions' linux/arm64 bootstraps
# from the current source (infra/build-functions.sh) before it defines the
# stacks. So a plain `cdk synth`, `cdk diff` or `cdk deploy` at the
# repository root deploys exactly the code checked out, with only Go and the
# CDK CLI installed.
set -u
cd "$(dirname "$0")/.." || exit 1
command -v go >/dev/null 2>&1 || {
	echo "nudge: cdk needs Go on PATH to build the app and the functions (the version go.mod names, or newer): install it from https://go.dev/dl/" >&2
	exit 1
}
# The app runs here: the host's platform, whatever GOOS and GOARCH say.
GOOS=$(go env GOHOSTOS) GOARCH=$(go env GOHOSTARCH) GOFLAGS=-mod=readonly \
	go build -C infra -o ../build/infra-app . || {
	echo "nudge: building the CDK app (infra/) failed: fix the compiler's errors above" >&2
	exit 1
}
exec build/infra-app
