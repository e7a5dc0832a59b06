"""`pip install ./python_client` from a clean tree, as a user would: a fresh virtual environment (no
site packages), the tracked files only (`git archive`), no stubs generated beforehand. The build
generates baton.v1 from the .proto files, so `import baton` and its stubs work, and a wheel built
the same way carries them. Needs PyPI (the build and runtime dependencies), as scripts/setup.sh does;
skips when pip cannot reach it."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
PIP_TIMEOUT_S = 600
UNREACHABLE = ("No matching distribution", "Could not find a version", "Temporary failure in name resolution",
               "Network is unreachable", "ProxyError", "NewConnectionError")


def tracked_tree(dest: Path) -> Path:
    """python_client/ and proto/ as committed, without anything generated or ignored."""
    if subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True).returncode != 0:
        pytest.skip("not a git checkout: nothing to archive")
    archive = dest / "tree.tar"
    subprocess.run(["git", "-C", str(REPO_ROOT), "archive", "--format=tar", "-o", str(archive), "HEAD",
                    "python_client", "proto"], check=True, timeout=60)
    with tarfile.open(archive) as tar:
        tar.extractall(dest / "tree", filter="tar")
    client = dest / "tree" / "python_client"
    assert not (client / "baton" / "v1").exists(), "generated stubs are committed"
    return client


def pip(python: Path, *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(python), "-m", "pip", "--disable-pip-version-check", *args],
                          capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
    if proc.returncode != 0 and any(marker in proc.stderr for marker in UNREACHABLE):
        pytest.skip(f"PyPI is not reachable: {proc.stderr.strip().splitlines()[-1]}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def test_pip_install_from_a_clean_tree_generates_the_stubs(tmp_path):
    client = tracked_tree(tmp_path)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    pip(python, "install", "-q", str(client))
    check = subprocess.run(
        [str(python), "-c", "import baton, baton.v1.inference_pb2 as p, baton.v1.inference_pb2_grpc as g; "
         "print(baton.Client.__name__, p.GenerateRequest.__name__, g.InferenceServiceStub.__name__)"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert check.returncode == 0, check.stderr
    assert check.stdout.split() == ["Client", "GenerateRequest", "InferenceServiceStub"]

    wheels = tmp_path / "wheels"
    pip(python, "wheel", "-q", "--no-deps", "-w", str(wheels), str(client))
    [wheel] = wheels.glob("baton-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for stub in ("inference_pb2.py", "inference_pb2_grpc.py", "worker_pb2.py", "worker_pb2_grpc.py", "__init__.py"):
        assert f"baton/v1/{stub}" in names, sorted(names)
