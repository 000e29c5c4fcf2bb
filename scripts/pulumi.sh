#!/usr/bin/env bash
# npm run pulumi -- ARGS: the real Pulumi CLI built by `npm run toolchain`, with the project's offline settings.
# Each setting below applies only when the caller has not set it.
#   PULUMI_BACKEND_URL         file://<repo>/.pulumi-state (git-ignored): state stays on this machine
#   PULUMI_CONFIG_PASSPHRASE   a fixed, public, local-only passphrase when neither it nor
#                              PULUMI_CONFIG_PASSPHRASE_FILE is set: fine for tests and previews,
#                              never for a stack whose secrets matter (set your own)
#   PULUMI_SKIP_UPDATE_CHECK=true                     no call to the Pulumi service for a newer version
#   PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true  a missing plugin is an error, not a download
# PATH: the toolchain directory first (the CLI takes pulumi-language-nodejs and pulumi-resource-* from PATH,
# pulumi/pulumi sdk/go/common/workspace/plugins.go), then node_modules/.bin (Node 22 from the npm `node`
# package: @pulumi/pulumi declares node >= 22).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=$("$ROOT/scripts/toolchain.sh" --dir)
if [ ! -x "$DIR/pulumi" ]; then
  echo "pulumi: no CLI in $DIR; run \`npm run toolchain\` first" >&2
  exit 1
fi

export PATH="$DIR:$ROOT/node_modules/.bin:$PATH"
if [ -z "${PULUMI_BACKEND_URL:-}" ]; then
  mkdir -p "$ROOT/.pulumi-state"
  export PULUMI_BACKEND_URL="file://$ROOT/.pulumi-state"
fi
if [ -z "${PULUMI_CONFIG_PASSPHRASE:-}" ] && [ -z "${PULUMI_CONFIG_PASSPHRASE_FILE:-}" ]; then
  export PULUMI_CONFIG_PASSPHRASE="spark-vllm-local-only-not-a-secret"
fi
export PULUMI_SKIP_UPDATE_CHECK=${PULUMI_SKIP_UPDATE_CHECK:-true}
export PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=${PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION:-true}

exec "$DIR/pulumi" "$@"
