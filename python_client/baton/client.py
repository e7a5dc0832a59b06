"""Client: the synchronous Baton client over one gRPC channel (grpcio).

    with baton.Client("127.0.0.1:50051") as client:
        for chunk in client.generate(prompt="Hello", max_tokens=16):
            print(chunk.text, end="", flush=True)
        result = client.complete(token_ids=[0, 6330, 310], max_tokens=8)

Every call carries a deadline: the client's `timeout` (seconds), or the call's own `timeout=`. Failed
calls raise BatonError (baton.errors) with the server's status code. Thread-safe: one Client may serve
many threads, as its grpc channel does.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Mapping, Sequence

import grpc

from baton.connection import call_metadata, channel_credentials
from baton.errors import BatonError
from baton.messages import (Chunk, Completion, Health, ModelInfo, build_chat, build_request,
                            chunk_from_proto, health_from_proto, model_info_from_proto)
from baton.v1 import inference_pb2 as pb
from baton.v1 import inference_pb2_grpc as pb_grpc

DEFAULT_TIMEOUT_S = 600.0


class GenerateStream(Iterator[Chunk]):
    """The chunks of one Generate call, in order; the last one has finish_reason set. Iterating raises
    BatonError when the call fails (CANCELLED after cancel()). Leaving a `with` block, or dropping the
    stream, cancels a call that is still running, which frees the request's resources on the server."""

    def __init__(self, call):
        self._call = call

    def __iter__(self) -> "GenerateStream":
        return self

    def __next__(self) -> Chunk:
        try:
            response = next(self._call)
        except grpc.RpcError as error:
            raise BatonError.from_rpc_error(error) from None
        return chunk_from_proto(response)

    def cancel(self) -> None:
        """Cancels the call (from any thread); a no-op once it has finished."""
        self._call.cancel()

    def __enter__(self) -> "GenerateStream":
        return self

    def __exit__(self, *exc) -> None:
        self.cancel()


class Client:
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
        self._channel = (grpc.insecure_channel(address, options=options) if credentials is None
                         else grpc.secure_channel(address, credentials, options=options))
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
                 structured_outputs: Mapping[str, Any] | None = None) -> GenerateStream:
        """Starts one generation and returns its stream of Chunks. Exactly one of prompt (text),
        token_ids and messages (ValueError otherwise). messages: OpenAI-style chat messages, rendered
        by the server with the model's chat template (with tools, add_generation_prompt and
        chat_template_kwargs). Greedy by default (temperature 0); temperature, top_k, top_p None: the
        model's defaults (its generation_config.json, else 1, off, 1). max_tokens None: up to the model's
        context. seed None: drawn by the server. logprobs k (0..20): per token the k most likely
        tokens' log-probabilities, then the sampled token's when it is not among them; None: none.
        request_id None: assigned by the server. model None: the served model. presence_penalty,
        frequency_penalty, repetition_penalty, min_p, logit_bias, min_tokens: the logits processors,
        as baton.messages.build_request documents them. prompt_logprobs k (0..20): the first chunk's
        prompt_logprobs score every prompt token after the first (its logprob given the ones before,
        then the k most likely there), as vLLM's prompt_logprobs. structured_outputs: a constraint on
        the output ({"json": schema}, {"regex": ...}, {"choice": [...]}, {"grammar": ...} or
        {"json_object": True}), as baton.messages.build_request documents it."""
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
        return GenerateStream(self._stub.Generate(request, timeout=self._timeout(timeout),
                                                       metadata=self._metadata))

    def complete(self, *args, **kwargs) -> Completion:
        """generate(...) run to its end; the same arguments. Raises BatonError if the call fails."""
        with self.generate(*args, **kwargs) as stream:
            return Completion.from_chunks(list(stream))

    def chat(self, messages: Iterable[Mapping[str, Any]], **kwargs) -> Completion:
        """The assistant's answer to `messages`, run to its end: complete(messages=messages, ...)."""
        return self.complete(messages=messages, **kwargs)

    def health(self, timeout: float | None = None) -> Health:
        return health_from_proto(self._unary(self._stub.Health, pb.HealthRequest(), timeout))

    def model_info(self, timeout: float | None = None) -> ModelInfo:
        return model_info_from_proto(
            self._unary(self._stub.GetModelInfo, pb.GetModelInfoRequest(), timeout))

    def close(self) -> None:
        """Closes the channel; calls still running are cancelled."""
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _timeout(self, timeout: float | None) -> float:
        return self.timeout if timeout is None else timeout

    def _unary(self, method, request, timeout: float | None):
        try:
            return method(request, timeout=self._timeout(timeout), metadata=self._metadata)
        except grpc.RpcError as error:
            raise BatonError.from_rpc_error(error) from None
