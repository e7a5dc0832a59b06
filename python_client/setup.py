"""Generates the stubs of baton.v1 from the .proto files (generate_stubs.py) before setuptools looks
at the packages, so that `pip install ./python_client` and `pip wheel ./python_client` work from a
clean clone (grpcio-tools is a build requirement in pyproject.toml, which holds the metadata)."""

import sys
from pathlib import Path

from setuptools import setup

sys.path.insert(0, str(Path(__file__).resolve().parent))
import generate_stubs  # noqa: E402

generate_stubs.generate()
setup()
