#!/usr/bin/env bash
# The whole test suite: set up and build (idempotent), then ctest, pytest and a short fuzz run.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
ctest --test-dir build --output-on-failure -j2 --timeout 600
BATON_BUILD_DIR="$PWD/build" .venv/bin/python -m pytest -q tests/python
# A short libFuzzer run of every tests/fuzz target (the corpus replay is in ctest above). 20 s each:
# with the clang build, the step stays under about 5 minutes on 2 cores from a cold ccache.
./scripts/fuzz.sh --seconds 20
