#!/usr/bin/env bash
# The pinned CDK CLI (infra/node_modules: aws-cdk 2.1148.1, infra/package-lock.json)
# aimed at the local emulator and nothing else:
#   localstack/cdk-local.sh bootstrap aws://000000000000/us-east-1
#   localstack/cdk-local.sh deploy <stack> --require-approval never ...
#
# The CLI (AWS SDK for JavaScript v3) honours AWS_ENDPOINT_URL for every
# service; S3 also needs AWS_ENDPOINT_URL_S3, and with an IP address there
# the SDK uses path-style requests, so no *.localhost name has to resolve.
# Every other AWS_* variable of the caller (profile, keys, session token,
# role) is dropped and ~/.aws is ignored, so a stray credential can never
# send this deploy to a real account. Telemetry, notices and the version
# check are off: the CLI talks to 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/../infra"

PORT=${MINISTACK_PORT:-4566}
ENDPOINT=http://127.0.0.1:$PORT

while read -r v; do unset "$v"; done < <(compgen -e | grep '^AWS_' || true)
unset CDK_DEFAULT_ACCOUNT CDK_DEFAULT_REGION
export AWS_ENDPOINT_URL=$ENDPOINT AWS_ENDPOINT_URL_S3=$ENDPOINT
export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test
export AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1
export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
export CDK_DISABLE_CLI_TELEMETRY=true CDK_DISABLE_VERSION_CHECK=true
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20

if [ ! -x node_modules/.bin/cdk ]; then
  echo "the pinned CDK CLI is missing: run 'make infra/node_modules/.installed' (npm ci in infra/)" >&2
  exit 1
fi
exec node_modules/.bin/cdk --no-notices "$@"
