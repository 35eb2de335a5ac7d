#!/bin/sh
# Builds each function's Lambda bootstrap from the current source: one
# linux/arm64 binary per directory of functions/ with a main.go, at
# OUT/<function>/bootstrap (OUT defaults to build; NUDGE_GOOS and
# NUDGE_GOARCH build for another platform, as make build-local does for the
# emulator). Reproducible: the same source and Go version give the same
# bytes (-trimpath -buildvcs=false, no cgo), so a CDK asset's hash changes
# exactly when its code does. The one owner of these flags: make build and
# the CDK app (cdk synth) both run it.
set -u
out=${1:-build}
cd "$(dirname "$0")/.." || exit 1
command -v go >/dev/null 2>&1 || {
	echo "nudge: building the functions needs Go on PATH (the version go.mod names, or newer): install it from https://go.dev/dl/" >&2
	exit 1
}
# Only what makes the bytes: no GOFLAGS, experiments or CPU levels from
# the caller's environment (an instrumented or different asset otherwise).
export GOFLAGS=-mod=readonly
# .ci/shifted-clock --all builds the emulator's bootstraps (build/local, as
# make build-local does; never a deployable asset) with its overlay of
# package time.
if [ -n "${NUDGE_TIME_OVERLAY:-}" ] && [ "$out" = build/local ]; then
	GOFLAGS="$GOFLAGS -overlay=$NUDGE_TIME_OVERLAY"
fi
unset GOEXPERIMENT GOARM64 GOAMD64 GOARM GO386 2>/dev/null
for dir in functions/*/; do
	fn=$(basename "$dir")
	[ -f "$dir/main.go" ] || continue # a function is a main package with main.go
	CGO_ENABLED=0 GOOS=${NUDGE_GOOS:-linux} GOARCH=${NUDGE_GOARCH:-arm64} go build -tags lambda.norpc -trimpath -buildvcs=false -ldflags='-s -w' \
		-o "$out/$fn/bootstrap" "./functions/$fn" || {
		echo "nudge: building functions/$fn (${NUDGE_GOOS:-linux}/${NUDGE_GOARCH:-arm64}) failed: fix the compiler's errors above" >&2
		exit 1
	}
done
