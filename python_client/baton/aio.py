"""AsyncClient: the asyncio Baton client (grpc.aio), the same surface as baton.Client.

    async with baton.AsyncClient("127.0.0.1:50051") as client:
        async for chunk in client.generate(prompt="Hello", max_tokens=16):
            print(chunk.text, end="", flush=True)
        result = await client.complete(token_ids=[0, 6330, 310], max_tokens=8)

Create and use it inside one running event loop (grpc.aio binds the channel to it). Every call carries
a deadline (the client's `timeout` or the call's own); failed calls raise BatonError.
"""

from __future__ import annotations

import asyncio
from typing import Any, Iterable, Mapping, Sequence

import grpc
import grpc.aio

from baton.client import DEFAULT_TIMEOUT_S
from baton.connection import call_metadata, channel_credentials
from baton.errors import BatonError
from baton.messages import (Chunk, Completion, Health, ModelInfo, build_chat, build_request,
                            chunk_from_proto, health_from_proto, model_info_from_proto)
from baton.v1 import inference_pb2 as pb
from baton.v1 import inference_pb2_grpc as pb_grpc


class AsyncGenerateStream:
    """The chunks of one Generate call (`async for`); the last one has finish_reason set. Iterating
    raises BatonError when the call fails (CANCELLED after cancel()); cancelling the task that
    iterates cancels the call too. Leaving an `async with` block cancels a call still running."""

    def __init__(self, call: grpc.aio.UnaryStreamCall):
        self._call = call
        self._cancelled_by_client = False

    def __aiter__(self) -> "AsyncGenerateStream":
        return self

    async def __anext__(self) -> Chunk:
        try:
            response = await self._call.read()
        except asyncio.CancelledError:
            if not self._cancelled_by_client:
                raise  # the task itself is being cancelled
            raise BatonError(grpc.StatusCode.CANCELLED, "cancelled by the client") from None
        except grpc.RpcError as error:
            raise BatonError.from_rpc_error(error) from None
        if response is grpc.aio.EOF:
            raise StopAsyncIteration
        return chunk_from_proto(response)

    def cancel(self) -> None:
        """Cancels the call; a no-op once it has finished."""
        if not self._call.done():
            self._cancelled_by_client = True
            self._call.cancel()

    async def __aenter__(self) -> "AsyncGenerateStream":
        return self

    async def __aexit__(self, *exc) -> None:
        self.cancel()


class AsyncClient:
    def __init__(self, address: str, timeout: float = DEFAULT_TIMEOUT_S,
                 channel_options: Iterable[tuple[str, object]] = (), *, api_key: str | None = None,
                 tls: bool = False, root_certificates: bytes | None = None):
        """address: "host:port" of a Baton scheduler. timeout: seconds, the default deadline of every
        call (a Generate call's deadline covers the whole stream). api_key: what a server started with
        --api-key requires (None: $BATON_API_KEY). tls or root_certificates (PEM bytes the server's
        certificate chains to; None with tls: the system's roots): a TLS channel."""
        self.address = address
        self.timeout = timeout
        self._metadata = call_metadata(api_key)
        credentials = channel_credentials(tls, root_certificates)
        options = list(channel_options)
        self._channel = (grpc.aio.insecure_channel(address, options=options) if credentials is None
                         else grpc.aio.secure_channel(address, credentials, options=options))
        self._stub = pb_grpc.InferenceServiceStub(self._channel)

    def generate(self, prompt: str | None = None, token_ids: Iterable[int] | None = None,
                 max_tokens: int | None = None, temperature: float | None = 0.0, top_k: int | None = None,
                 top_p: float | None = None, seed: int | None = None, stop: str | Iterable[str] = (),
                 stop_token_ids: Iterable[int] = (), ignore_eos: bool = False, logprobs: int | None = None,
                 *, request_id: str | None = None, model: str | None = None,
                 messages: Iterable[Mapping[str, Any]] | None = None,
                 tools: Sequence[Mapping[str, Any]] | None = None, add_generation_prompt: bool = True,
                 chat_template_kwargs: Mapping[str, Any] | None = None,
                 timeout: float | None = None, presence_penalty: float = 0.0,
                 frequency_penalty: float = 0.0, repetition_penalty: float = 1.0,
                 min_p: float = 0.0, logit_bias: Mapping[int, float] | None = None,
                 min_tokens: int = 0, prompt_logprobs: int | None = None,
                 structured_outputs: Mapping[str, Any] | None = None) -> AsyncGenerateStream:
        """Starts one generation; see baton.Client.generate for the arguments."""
        chat = (None if messages is None
                else build_chat(messages, tools, add_generation_prompt, chat_template_kwargs))
        request = build_request(prompt, token_ids, max_tokens, temperature, top_k, top_p, seed, stop,
                                stop_token_ids, ignore_eos, logprobs, request_id, model, chat,
                                presence_penalty=presence_penalty,
                                frequency_penalty=frequency_penalty,
                                repetition_penalty=repetition_penalty, min_p=min_p,
                                logit_bias=logit_bias, min_tokens=min_tokens,
                                prompt_logprobs=prompt_logprobs,
                                structured_outputs=structured_outputs)
        return AsyncGenerateStream(self._stub.Generate(request, timeout=self._timeout(timeout),
                                                       metadata=self._metadata))

    async def complete(self, *args, **kwargs) -> Completion:
        """generate(...) run to its end; the same arguments."""
        async with self.generate(*args, **kwargs) as stream:
            return Completion.from_chunks([chunk async for chunk in stream])

    async def chat(self, messages: Iterable[Mapping[str, Any]], **kwargs) -> Completion:
        """The assistant's answer to `messages`; see baton.Client.chat."""
        return await self.complete(messages=messages, **kwargs)

    async def health(self, timeout: float | None = None) -> Health:
        return health_from_proto(await self._unary(self._stub.Health, pb.HealthRequest(), timeout))

    async def model_info(self, timeout: float | None = None) -> ModelInfo:
        return model_info_from_proto(
            await self._unary(self._stub.GetModelInfo, pb.GetModelInfoRequest(), timeout))

    async def close(self) -> None:
        """Closes the channel; calls still running are cancelled."""
        await self._channel.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    def _timeout(self, timeout: float | None) -> float:
        return self.timeout if timeout is None else timeout

    async def _unary(self, method, request, timeout: float | None):
        try:
            return await method(request, timeout=self._timeout(timeout), metadata=self._metadata)
        except grpc.RpcError as error:
            raise BatonError.from_rpc_error(error) from None
