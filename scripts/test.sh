#!/usr/bin/env bash
# The whole test suite: set up and build (idempotent), then ctest and pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
ctest --test-dir build --output-on-failure -j2 --timeout 600
BATON_BUILD_DIR="$PWD/build" .venv/bin/python -m pytest -q tests/python
