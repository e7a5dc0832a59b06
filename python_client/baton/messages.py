"""Plain Python values for Baton's public API, and their conversion to and from the generated protos.

Everything here only converts: the server validates requests (and answers INVALID_ARGUMENT for
anything malformed), so the client passes values through unchecked, except for the shape of the
call itself (exactly one of prompt, token_ids and messages).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from baton.v1 import inference_pb2 as pb

_FINISH_REASONS = {
    pb.FINISH_REASON_LENGTH: "length",
    pb.FINISH_REASON_STOP: "stop",
    pb.FINISH_REASON_CANCELLED: "cancelled",
}


@dataclass(frozen=True)
class TokenLogprob:
    token_id: int
    logprob: float
    rank: int = 0  # 1 + the number of tokens the model found more likely; 0: not known


@dataclass(frozen=True)
class Timing:
    """Server-side timestamps, microseconds since the Unix epoch; 0 when a phase did not happen (or
    was reported on another chunk)."""

    arrival_us: int = 0
    prefill_start_us: int = 0
    prefill_end_us: int = 0
    kv_transfer_start_us: int = 0
    kv_transfer_end_us: int = 0
    token_emit_us: tuple[int, ...] = ()  # [num tokens of the chunk (or of the whole result)]


@dataclass(frozen=True)
class Chunk:
    """One streamed response: the tokens the server produced since the previous chunk."""

    request_id: str
    text: str  # text completed by these tokens (never a broken UTF-8 sequence)
    token_ids: tuple[int, ...]
    logprobs: tuple[tuple[TokenLogprob, ...], ...]  # [len(token_ids)][k (+1)] with logprobs=k, else ()
    finish_reason: str | None  # "length" | "stop" | "cancelled" on the last chunk, else None
    timing: Timing
    # Set on the last chunk only.
    prompt_token_ids: tuple[int, ...] = ()
    num_prompt_tokens: int = 0
    num_generated_tokens: int = 0
    num_cached_tokens: int = 0  # prompt tokens whose KV came from a worker's prefix cache
    # On the first chunk with prompt_logprobs=k: [num prompt tokens], the first empty; each the k
    # most likely tokens there, then the prompt token when it is not among them.
    prompt_logprobs: tuple[tuple[TokenLogprob, ...], ...] = ()


@dataclass(frozen=True)
class Completion:
    """A whole generation: the chunks of one request joined."""

    request_id: str
    text: str
    token_ids: tuple[int, ...]
    logprobs: tuple[tuple[TokenLogprob, ...], ...]
    finish_reason: str | None
    timing: Timing  # phase timestamps from whichever chunk carried them; token_emit_us of all tokens
    prompt_token_ids: tuple[int, ...]
    num_prompt_tokens: int
    num_generated_tokens: int
    num_chunks: int = 0
    prompt_logprobs: tuple[tuple[TokenLogprob, ...], ...] = ()  # as Chunk's, when asked for
    num_cached_tokens: int = 0  # as Chunk's

    @classmethod
    def from_chunks(cls, chunks: Sequence[Chunk]) -> "Completion":
        last = chunks[-1] if chunks else None
        phases = {}
        for name in ("arrival_us", "prefill_start_us", "prefill_end_us", "kv_transfer_start_us",
                     "kv_transfer_end_us"):
            phases[name] = next((getattr(c.timing, name) for c in chunks if getattr(c.timing, name)), 0)
        return cls(
            request_id=last.request_id if last else "",
            text="".join(c.text for c in chunks),
            token_ids=tuple(t for c in chunks for t in c.token_ids),
            logprobs=tuple(lp for c in chunks for lp in c.logprobs),
            finish_reason=last.finish_reason if last else None,
            timing=Timing(**phases, token_emit_us=tuple(t for c in chunks for t in c.timing.token_emit_us)),
            prompt_token_ids=last.prompt_token_ids if last else (),
            num_prompt_tokens=last.num_prompt_tokens if last else 0,
            num_generated_tokens=last.num_generated_tokens if last else 0,
            num_chunks=len(chunks),
            prompt_logprobs=next((c.prompt_logprobs for c in chunks if c.prompt_logprobs), ()),
            num_cached_tokens=last.num_cached_tokens if last else 0,
        )


@dataclass(frozen=True)
class Health:
    status: str  # "SERVING" | "DEGRADED" | "NOT_SERVING" | "UNSPECIFIED"
    problems: tuple[str, ...] = field(default=())

    @property
    def serving(self) -> bool:
        return self.status == "SERVING"


@dataclass(frozen=True)
class ModelInfo:
    model: str
    architecture: str
    max_model_len: int
    vocab_size: int
    dtype: str
    bos_token_id: int
    eos_token_ids: tuple[int, ...]


def build_request(prompt: str | None = None, token_ids: Iterable[int] | None = None,
                  max_tokens: int | None = None, temperature: float | None = 0.0, top_k: int | None = None,
                  top_p: float | None = None, seed: int | None = None, stop: str | Iterable[str] = (),
                  stop_token_ids: Iterable[int] = (), ignore_eos: bool = False, logprobs: int | None = None,
                  request_id: str | None = None, model: str | None = None,
                  chat: pb.ChatPrompt | None = None, *,
                  presence_penalty: float = 0.0, frequency_penalty: float = 0.0,
                  repetition_penalty: float = 1.0, min_p: float = 0.0,
                  logit_bias: Mapping[int, float] | None = None,
                  min_tokens: int = 0, prompt_logprobs: int | None = None,
                  structured_outputs: Mapping[str, Any] | None = None) -> pb.GenerateRequest:
    """A GenerateRequest. Exactly one of prompt, token_ids and chat (ValueError otherwise); an empty
    prompt is sent as given, for the server to reject. max_tokens/seed None: unset (the server's
    default). The logits processors (vLLM's meanings; neutral by default, the server checks the
    ranges): presence_penalty and frequency_penalty in [-2, 2] over the generated tokens,
    repetition_penalty > 0 over prompt and generated tokens, min_p in [0, 1], logit_bias {token id:
    bias in [-100, 100]}, min_tokens: EOS, stop_token_ids and stop strings do not end the
    generation before this many tokens. prompt_logprobs k: score the prompt (vLLM's
    prompt_logprobs), on the first chunk; None: not. structured_outputs: one constraint on the
    output in vLLM's spelling, {"json": schema (a dict or its JSON text)}, {"regex": str}, {"choice":
    [str, ...]}, {"grammar": EBNF str} or {"json_object": True}, with "strict": False to let objects
    carry properties the schema does not name and "disable_any_whitespace": True for compact JSON;
    None: none."""
    if [prompt is not None, token_ids is not None, chat is not None].count(True) != 1:
        raise ValueError("give exactly one of prompt, token_ids and messages")
    request = pb.GenerateRequest(request_id=request_id or "", model=model or "")
    if logprobs is not None:
        request.logprobs = logprobs
    if prompt is not None:
        request.text = prompt
    elif chat is not None:
        request.chat.CopyFrom(chat)
    else:
        request.token_ids.SetInParent()
        request.token_ids.ids.extend(token_ids)
    # None: the server's default, the model's generation_config.json value (else vLLM's).
    if temperature is not None:
        request.sampling.temperature = temperature
    if top_k is not None:
        request.sampling.top_k = top_k
    if top_p is not None:
        request.sampling.top_p = top_p
    if seed is not None:
        request.sampling.seed = seed
    if max_tokens is not None:
        request.stop.max_tokens = max_tokens
    request.stop.stop.extend([stop] if isinstance(stop, str) else stop)
    request.stop.stop_token_ids.extend(stop_token_ids)
    request.stop.ignore_eos = ignore_eos
    request.sampling.presence_penalty = presence_penalty
    request.sampling.frequency_penalty = frequency_penalty
    request.sampling.repetition_penalty = repetition_penalty
    request.sampling.min_p = min_p
    for token_id, bias in (logit_bias or {}).items():
        request.sampling.logit_bias[int(token_id)] = bias
    request.stop.min_tokens = min_tokens
    if prompt_logprobs is not None:
        request.sampling.prompt_logprobs = prompt_logprobs
    if structured_outputs:
        _set_structured_outputs(request.sampling.structured_outputs, structured_outputs)
    return request


def _set_structured_outputs(out: pb.StructuredOutputs, spec: Mapping[str, Any]) -> None:
    kinds = [key for key in ("json", "regex", "choice", "grammar", "json_object") if spec.get(key) is not None]
    unknown = set(spec) - {"json", "regex", "choice", "grammar", "json_object", "strict", "disable_any_whitespace"}
    if len(kinds) != 1 or unknown:
        raise ValueError("structured_outputs: give exactly one of json, regex, choice, grammar and json_object"
                         + (f" (unknown: {', '.join(sorted(unknown))})" if unknown else ""))
    [kind] = kinds
    value = spec[kind]
    if kind == "json":
        out.json = value if isinstance(value, str) else json.dumps(value)
    elif kind == "choice":
        out.choice.choices.extend(value)
    elif kind == "json_object":
        out.json_object = bool(value)
    else:
        setattr(out, kind, value)
    if "strict" in spec:
        out.strict = bool(spec["strict"])
    if spec.get("disable_any_whitespace"):
        out.any_whitespace = False


def chunk_from_proto(response: pb.GenerateResponse) -> Chunk:
    t = response.timing
    return Chunk(
        request_id=response.request_id,
        text=response.text,
        token_ids=tuple(response.token_ids),
        logprobs=tuple(tuple(TokenLogprob(lp.token_id, lp.logprob, lp.rank) for lp in entry.top)
                       for entry in response.logprobs),
        finish_reason=_FINISH_REASONS.get(response.finish_reason),
        timing=Timing(arrival_us=t.arrival_us, prefill_start_us=t.prefill_start_us,
                      prefill_end_us=t.prefill_end_us, kv_transfer_start_us=t.kv_transfer_start_us,
                      kv_transfer_end_us=t.kv_transfer_end_us, token_emit_us=tuple(t.token_emit_us)),
        prompt_token_ids=tuple(response.prompt_token_ids),
        num_prompt_tokens=response.num_prompt_tokens,
        num_generated_tokens=response.num_generated_tokens,
        num_cached_tokens=response.num_cached_tokens,
        prompt_logprobs=tuple(tuple(TokenLogprob(lp.token_id, lp.logprob, lp.rank) for lp in entry.top)
                              for entry in response.prompt_logprobs),
    )


def health_from_proto(response: pb.HealthResponse) -> Health:
    name = pb.HealthResponse.Status.Name(response.status).removeprefix("STATUS_")
    return Health(status=name, problems=tuple(response.problems))


def model_info_from_proto(response: pb.GetModelInfoResponse) -> ModelInfo:
    return ModelInfo(model=response.model, architecture=response.architecture,
                     max_model_len=response.max_model_len, vocab_size=response.vocab_size,
                     dtype=response.dtype, bos_token_id=response.bos_token_id,
                     eos_token_ids=tuple(response.eos_token_ids))


def build_chat(messages: Iterable[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None,
               add_generation_prompt: bool = True,
               chat_template_kwargs: Mapping[str, Any] | None = None) -> pb.ChatPrompt:
    """A ChatPrompt from OpenAI-style messages: dicts with "role" and "content" (a string, or None),
    and optionally "name", "tool_call_id" and "tool_calls" (a list, sent as JSON)."""
    chat = pb.ChatPrompt(add_generation_prompt=add_generation_prompt)
    for message in messages:
        entry = chat.messages.add(role=message["role"], name=message.get("name") or "",
                                  tool_call_id=message.get("tool_call_id") or "")
        if message.get("content") is not None:
            entry.content = message["content"]
        if message.get("tool_calls") is not None:
            entry.tool_calls_json = json.dumps(message["tool_calls"])
    if tools is not None:
        chat.tools_json = json.dumps(list(tools))
    if chat_template_kwargs is not None:
        chat.chat_template_kwargs_json = json.dumps(dict(chat_template_kwargs))
    return chat
