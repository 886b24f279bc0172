#!/usr/bin/env bash
# Runs every test: installs what is missing, starts Postgres, NATS and the Docker engine, builds the
# instance images, typechecks, runs the vitest suites (each suite starts its own nats-server, database,
# devchain and service processes), then scans every log line of the run for the secrets the tests used.
source "$(dirname "$0")/env.sh"

AGENTHOST_TEST_TOOLS=1 bash "$DEPLOY_DIR/install.sh"
bash "$DEPLOY_DIR/infra.sh"
set -a; source "$AGENTHOST_STATE/infra.env"; set +a
bash "$DEPLOY_DIR/images/build.sh" all

cd "$REPO_DIR"
rm -rf .test-logs && mkdir -p .test-logs
say "typecheck"
npx --no-install tsc -p tsconfig.json --noEmit

say "tests"
status=0
npx --no-install vitest run --reporter=default --reporter=json --outputFile.json=.test-logs/vitest.json "$@" || status=$?

say "log scan"
node deploy/scan-logs.ts || status=1

# One plain closing line for CI: "N passed, N failed".
node -e '
  const r = JSON.parse(require("node:fs").readFileSync(".test-logs/vitest.json", "utf8"));
  console.log(`tests: ${r.numPassedTests} passed, ${r.numFailedTests} failed, ${r.numPendingTests + (r.numTodoTests ?? 0)} skipped`);
' || status=1
exit $status
