"""Generates the gRPC stubs of baton.v1 (inference_pb2*.py, worker_pb2*.py) from the .proto files.

The one way they are made: `pip install ./python_client` and wheel builds run it (setup.py), and
scripts/setup.sh runs it for the editable install of the development tree. The stubs are never
committed; the .proto files are the source (proto/ at the repository root, reached through the
python_client/proto symlink so that an sdist carries them too).

    python python_client/generate_stubs.py   # needs grpcio-tools
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROTOS = ("baton/v1/inference.proto", "baton/v1/worker.proto")


def proto_root() -> Path:
    for candidate in (HERE / "proto", HERE.parent / "proto"):
        if all((candidate / proto).is_file() for proto in PROTOS):
            return candidate
    raise FileNotFoundError(f"the .proto files ({', '.join(PROTOS)}) are not under {HERE}/proto "
                            f"nor {HERE.parent}/proto")


def generate(out_dir: Path = HERE) -> None:
    """Writes baton/v1/*_pb2*.py (and the package's __init__.py) under `out_dir`."""
    import grpc_tools  # a build dependency, imported only when generating
    from grpc_tools import protoc

    root = proto_root()
    well_known = Path(grpc_tools.__file__).resolve().parent / "_proto"  # google/protobuf/*.proto
    args = ["grpc_tools.protoc", f"-I{root}", f"-I{well_known}", f"--python_out={out_dir}",
            f"--grpc_python_out={out_dir}",
            *(str(root / proto) for proto in PROTOS)]
    if protoc.main(args) != 0:
        raise RuntimeError(f"grpc_tools.protoc failed on {', '.join(PROTOS)}")
    init = out_dir / "baton" / "v1" / "__init__.py"
    if not init.exists():
        init.write_text('"""Stubs generated from proto/baton/v1 (python_client/generate_stubs.py)."""\n')


if __name__ == "__main__":
    generate()
    sys.exit(0)
