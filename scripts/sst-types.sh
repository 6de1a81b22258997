#!/usr/bin/env bash
# Writes .sst/platform (SST's component sources and config.d.ts) so that `tsc -p tsconfig.infra.json` can
# type-check sst.config.ts and infra/ offline, without AWS credentials and without Pulumi's engine. `.sst` is
# git-ignored, so a clean clone (CI) needs this before the infra type check. Skips the ~45 s install when
# .sst/platform already matches the installed sst version. Needs the npm registry the first time.
set -euo pipefail
cd "$(dirname "$0")/.."

want="$(node -p "require('./node_modules/sst/package.json').version")"
have="$(cat .sst/platform/version 2>/dev/null || true)"
if [ -f .sst/platform/config.d.ts ] && [ "$have" = "$want" ]; then
  echo "sst-types: .sst/platform is present (sst $want)"
  exit 0
fi

echo "sst-types: installing SST $want platform types into .sst/platform"
# No Pulumi download, no Bun, no telemetry: only the npm install of the platform sources.
SST_SKIP_DEPENDENCY_CHECK=1 SST_NO_BUN=1 SST_TELEMETRY_DISABLED=1 npx --no-install sst install --stage ci
test -f .sst/platform/config.d.ts || { echo "sst-types: .sst/platform/config.d.ts was not written" >&2; exit 1; }
