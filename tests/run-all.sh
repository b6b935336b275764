#!/usr/bin/env bash
# The whole test suite on a fresh Debian machine: set up (tools/setup.sh --tests), then pytest.
# README.md's test command; .ci/run calls it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh --tests
set +e
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"
rc=$?
set -e
if [ $rc -eq 5 ]; then
  echo "pytest collected no tests" >&2
  exit 1
fi
exit $rc
