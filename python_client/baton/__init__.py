"""Python client for Baton, a disaggregated LLM serving runtime.

baton.Client (synchronous, grpcio) and baton.AsyncClient (asyncio, grpc.aio) call a Baton scheduler's
public API (proto/baton/v1/inference.proto): Generate (streamed Chunks), Health and GetModelInfo.
`python -m baton` is a command line over Client. The generated stubs live in baton.v1 (written by
scripts/setup.sh with grpc_tools.protoc).
"""

from baton.aio import AsyncClient, AsyncGenerateStream
from baton.client import Client, GenerateStream
from baton.errors import BatonError
from baton.messages import Chunk, Completion, Health, ModelInfo, Timing, TokenLogprob

__all__ = [
    "AsyncClient", "AsyncGenerateStream", "BatonError", "Chunk", "Client", "Completion",
    "GenerateStream", "Health", "ModelInfo", "Timing", "TokenLogprob",
]
