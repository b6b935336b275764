#!/usr/bin/env bash
# The whole test suite on a fresh Debian machine: set up (tools/setup.sh --tests), the type check
# (mypy, configured in pyproject.toml), the layer contracts (lint-imports), then pytest. README.md's test command; .ci/run calls it.
# Arguments go to pytest (after ours: `-n 0` runs the tests in one process). A type error fails the run (pytest still runs, to show both at once).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh --tests
set +e
typed=0
if .venv/bin/python -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
  echo "+ mypy" >&2
  .venv/bin/mypy  # prints "Success: no issues found in N source files" or "Found N errors in ..."
  typed=$?
else
  echo "mypy skipped: it needs Python 3.10 or later" >&2
fi
# the layers (docs/architecture.md): import-linter's contracts in pyproject.toml ([tool.importlinter])
echo "+ lint-imports" >&2
PYTHONPATH=tracer .venv/bin/lint-imports
layered=$?
# two pytest-xdist workers (CI has 2 cores), each test file whole on one of them (its module fixtures built
# once), the slowest files first (conftest.py: SLOW_FIRST); each worker has its own Wine prefix
# (tests/winetools.py). The 25 slowest tests are listed at the end.
.venv/bin/python -m pytest -q -p no:cacheprovider -n 2 --dist loadfile --no-loadscope-reorder --durations=25 "$@"
rc=$?
set -e
if [ $rc -eq 5 ]; then
  echo "pytest collected no tests" >&2
  exit 1
fi
if [ $layered -ne 0 ]; then
  echo "lint-imports found an import against the layers (listed before the tests)" >&2
  [ $rc -ne 0 ] || rc=1
fi
if [ $typed -ne 0 ]; then
  echo "mypy found type errors (listed before the tests)" >&2
  [ $rc -ne 0 ] || rc=1
fi
exit $rc
