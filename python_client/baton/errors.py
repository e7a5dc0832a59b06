"""The one exception type the Baton client raises for a failed call."""

from __future__ import annotations

import grpc


class BatonError(Exception):
    """A call to a Baton server failed.

    code: the gRPC status code, as the server chose it (INVALID_ARGUMENT for a malformed request,
    UNAVAILABLE for a worker or server that is down, DEADLINE_EXCEEDED when the client's timeout
    passed, CANCELLED after GenerateStream.cancel(), ...). details: the server's message.
    """

    def __init__(self, code: grpc.StatusCode, details: str):
        super().__init__(f"{code.name}: {details}")
        self.code = code
        self.details = details

    @classmethod
    def from_rpc_error(cls, error: grpc.RpcError) -> "BatonError":
        """Wraps a grpc.RpcError (sync or asyncio); an error without a status becomes UNKNOWN."""
        code = error.code() if callable(getattr(error, "code", None)) else None
        details = error.details() if callable(getattr(error, "details", None)) else None
        return cls(code or grpc.StatusCode.UNKNOWN, details or str(error))
