"""Shared pytest fixtures: where the build and the `baton` binary are, and the test checkpoints.

BATON_BUILD_DIR names the CMake build directory (default <repo>/build). Tests that drive the engine
take the `baton_binary` fixture and carry the `engine` marker; a missing binary fails them (it does not
skip them), so a CI run without a build cannot pass silently. Deselect them with `-m "not engine"`.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from serving_fixtures import DeploymentFactory

REPO_ROOT = Path(__file__).resolve().parents[2]
MAKE_CHECKPOINT = REPO_ROOT / "scripts" / "make_checkpoint.py"


def pytest_configure(config):
    config.addinivalue_line("markers", "engine: drives the `baton` binary (fails if it is missing)")


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def build_dir() -> Path:
    return Path(os.environ.get("BATON_BUILD_DIR", REPO_ROOT / "build")).resolve()


@pytest.fixture(scope="session")
def baton_binary(build_dir: Path) -> Path:
    """<build dir>/bin/baton; fails the requesting test when it has not been built."""
    binary = build_dir / "bin" / "baton"
    if not os.access(binary, os.X_OK):
        pytest.fail(f"{binary} not found: build it (scripts/setup.sh) or set BATON_BUILD_DIR",
                    pytrace=False)
    return binary


@pytest.fixture(scope="session")
def run_baton(baton_binary: Path):
    """run_baton(*args, timeout=120) -> subprocess.CompletedProcess (text mode). Fails the test with
    the command and its stderr when the exit code is not 0, unless check=False."""

    def run(*args, check: bool = True, timeout: float = 120, **kwargs):
        cmd = [str(baton_binary), *map(str, args)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kwargs)
        if check and proc.returncode != 0:
            pytest.fail(f"{' '.join(cmd)} exited with {proc.returncode}:\n{proc.stderr}", pytrace=False)
        return proc

    return run


@pytest.fixture(scope="session")
def make_checkpoint_module():
    """scripts/make_checkpoint.py imported as a module."""
    spec = importlib.util.spec_from_file_location("make_checkpoint", MAKE_CHECKPOINT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built.
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def tiny_model(build_dir: Path, make_checkpoint_module, tmp_path_factory) -> Path:
    """$BATON_BUILD_DIR/models/tiny when complete (scripts/setup.sh makes it), else a fresh one."""
    mc = make_checkpoint_module
    existing = build_dir / "models" / "tiny"
    if mc.is_complete(existing, mc.stamp("tiny", "f32", 0, 1, None)):
        return existing
    out = tmp_path_factory.mktemp("models") / "tiny"
    mc.write_checkpoint(out, "tiny")
    return out


@pytest.fixture(scope="session")
def models_dir(build_dir: Path) -> Path:
    """<build dir>/models holding tiny, small and qwen2-tiny (f32, seed 0); generated once by
    `make_checkpoint.py --all`, which keeps models that are already complete."""
    out = build_dir / "models"
    subprocess.run([sys.executable, str(MAKE_CHECKPOINT), "--all", str(out)], check=True)
    return out


@pytest.fixture(scope="session")
def checkpoint_variant(models_dir: Path, make_checkpoint_module):
    """checkpoint_variant(name, shape=..., dtype=..., seed=..., shards=..., rope_scaling=...) -> the
    directory models_dir/name holding that checkpoint, generated unless already complete."""

    def get(name: str, shape: str, dtype: str = "f32", seed: int = 0, shards: int = 1,
            rope_scaling: str | None = None) -> Path:
        out = models_dir / name
        mc = make_checkpoint_module
        if not mc.is_complete(out, mc.stamp(shape, dtype, seed, shards, rope_scaling)):
            mc.write_checkpoint(out, shape, dtype, seed, shards, rope_scaling)
        return out

    return get


@pytest.fixture
def fresh_deployments(baton_binary, tiny_model, tmp_path):
    """A DeploymentFactory whose deployments are stopped (and checked) after the test."""
    factory = DeploymentFactory(baton_binary, tiny_model, tmp_path)
    yield factory
    problems = factory.stop_all()
    assert not problems, "\n".join(problems)
