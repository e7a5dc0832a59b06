"""Tensor/pipeline parallelism on the generated checkpoints (tiny, small, qwen2-tiny).

The C++ tests that compare every layout with the whole model on these checkpoints skip themselves
unless BATON_TEST_MODELS_DIR names the models (ctest runs before they exist); this runs them with it
set, so CI exercises them: the forward pass per rank (parallel_forward_test) and the engine on
ranks with a continuous batch (model_ranks_test).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

TESTS = [
    "tests/runtime/model/parallel_forward_test",
    "tests/runtime/engine/model_ranks_test",
]


@pytest.mark.engine
@pytest.mark.parametrize("test", TESTS)
def test_layouts_match_the_whole_model_on_checkpoints(test: str, build_dir: Path, models_dir: Path):
    binary = build_dir / test
    if not os.access(binary, os.X_OK):
        pytest.fail(f"{binary} not found: build it (scripts/setup.sh)", pytrace=False)
    env = dict(os.environ, BATON_TEST_MODELS_DIR=str(models_dir))
    proc = subprocess.run([str(binary), "--gtest_filter=Checkpoints/*", "--gtest_brief=1"],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    # Every case ran: none skipped for a missing checkpoint.
    assert "SKIPPED" not in proc.stdout, proc.stdout[-4000:]
    assert "PASSED" in proc.stdout
