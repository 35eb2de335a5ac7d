#!/bin/sh
# The CDK app command (cdk.json): builds the functions' bootstraps from the
# current source, then the CDK app (infra/), and runs it. So a plain
# `cdk synth`, `cdk diff` or `cdk deploy` at the repository root deploys
# exactly the code checked out, with only Go and the CDK CLI installed.
set -u
cd "$(dirname "$0")/.." || exit 1
sh infra/build-functions.sh build || exit 1
go build -C infra -o ../build/infra-app . || {
	echo "nudge: building the CDK app (infra/) failed: fix the compiler's errors above" >&2
	exit 1
}
exec build/infra-app
