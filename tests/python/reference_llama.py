"""An independent NumPy reference of the LLaMA-family forward pass (Hugging Face LlamaForCausalLM /
Qwen2ForCausalLM semantics), in float64, for checking the engine's float32 logits.

Written from the architecture, sharing no code with the engine or the checkpoint generator: it reads
config.json and the safetensors files itself. Per layer:
    h = x + o_proj(attention(rope(q_proj(n)), rope(k_proj(n)), v_proj(n))),  n = rms_norm(x)
    x = h + down_proj(silu(gate_proj(m)) * up_proj(m)),                      m = rms_norm(h)
then a final rms_norm and lm_head (the embedding when tie_word_embeddings). Attention is causal with
GQA (query head i reads KV head i // (num_heads / num_kv_heads), as HF's repeat_kv), scaled by
1/sqrt(head_dim). RoPE uses HF's rotate_half (NeoX) pairing: dimension i pairs with i + head_dim/2 and
both turn by position * inv_freq[i], inv_freq[i] = theta^(-2i/head_dim), optionally rescaled
("linear" or "llama3" rope_scaling). q/k/v biases when the architecture has them (Qwen2) or
config.attention_bias is true.

Usage:
    model = ReferenceLlama.from_dir(model_dir)
    model.logits(ids)                     # [len(ids), vocab], a full recompute
    cache = model.new_cache(); model.forward(ids, cache); model.forward([next_id], cache)
    model.greedy(prompt_ids, n)           # (n generated ids, [n, vocab] logits that chose them)
Not thread-safe: a KvCache belongs to one caller.
"""

from __future__ import annotations

import dataclasses
import json
import struct
from pathlib import Path

import numpy as np

_SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "F64": np.float64}


@dataclasses.dataclass(frozen=True)
class LlamaConfig:
    architecture: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    rms_norm_eps: float
    rope_theta: float
    rope_scaling: dict | None
    tie_word_embeddings: bool
    attention_bias: bool

    @staticmethod
    def from_dict(d: dict) -> "LlamaConfig":
        arch = d["architectures"][0]
        if arch not in ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM"):
            raise ValueError(f"unsupported architecture {arch}")
        num_heads = d["num_attention_heads"]
        return LlamaConfig(
            architecture=arch,
            hidden_size=d["hidden_size"],
            num_layers=d["num_hidden_layers"],
            num_heads=num_heads,
            num_kv_heads=d.get("num_key_value_heads") or num_heads,
            head_dim=d.get("head_dim") or d["hidden_size"] // num_heads,
            intermediate_size=d["intermediate_size"],
            vocab_size=d["vocab_size"],
            rms_norm_eps=d.get("rms_norm_eps", 1e-6),
            rope_theta=d.get("rope_theta", 10000.0),
            rope_scaling=d.get("rope_scaling"),
            tie_word_embeddings=d.get("tie_word_embeddings", False),
            attention_bias=d.get("attention_bias", arch == "Qwen2ForCausalLM"),
        )


def load_config(model_dir: Path | str) -> LlamaConfig:
    return LlamaConfig.from_dict(json.loads((Path(model_dir) / "config.json").read_text()))


# ---------------------------------------------------------------------------------------------------
# Weights


def read_safetensors(path: Path | str) -> dict[str, np.ndarray]:
    """Every tensor of one .safetensors file as float32 (F16 and BF16 widen exactly)."""
    raw = Path(path).read_bytes()
    (header_len,) = struct.unpack_from("<Q", raw, 0)
    header = json.loads(raw[8:8 + header_len])
    data = memoryview(raw)[8 + header_len:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        stored = np.frombuffer(data[begin:end], dtype=_SAFETENSORS_DTYPES[info["dtype"]])
        if info["dtype"] == "BF16":  # bfloat16 is the upper half of a float32.
            values = (stored.astype(np.uint32) << np.uint32(16)).view(np.float32)
        else:
            values = stored.astype(np.float32)
        tensors[name] = values.reshape(info["shape"])
    return tensors


def load_weights(model_dir: Path | str) -> dict[str, np.ndarray]:
    """All tensors of a checkpoint: model.safetensors, or the shards of model.safetensors.index.json."""
    model_dir = Path(model_dir)
    index = model_dir / "model.safetensors.index.json"
    if index.exists():
        files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    weights = {}
    for f in files:
        weights.update(read_safetensors(model_dir / f))
    return weights


# ---------------------------------------------------------------------------------------------------
# Building blocks (float64)


def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """x [n, hidden] -> x / sqrt(mean(x^2) + eps) * weight."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def silu(x: np.ndarray) -> np.ndarray:
    """x * sigmoid(x), with sigmoid written through tanh so that no exp overflows."""
    return x * 0.5 * (1.0 + np.tanh(0.5 * x))


def rope_inv_freq(head_dim: int, theta: float, rope_scaling: dict | None = None) -> np.ndarray:
    """[head_dim / 2] rotation frequencies theta^(-2i/head_dim), rescaled as HF's
    _compute_linear_scaling / _compute_llama3_parameters do."""
    inv_freq = theta ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    if rope_scaling is None:
        return inv_freq
    kind = rope_scaling.get("rope_type", rope_scaling.get("type"))
    factor = rope_scaling["factor"]
    if kind == "linear":
        return inv_freq / factor
    if kind != "llama3":
        raise ValueError(f"unsupported rope_scaling type {kind}")
    low, high = rope_scaling["low_freq_factor"], rope_scaling["high_freq_factor"]
    old_context_len = rope_scaling["original_max_position_embeddings"]
    wavelen = 2 * np.pi / inv_freq
    smooth = (old_context_len / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * inv_freq / factor + smooth * inv_freq
    return np.where(wavelen < old_context_len / high, inv_freq,  # high frequencies: kept
                    np.where(wavelen > old_context_len / low, inv_freq / factor,  # low: scaled
                             smoothed))


def apply_rope(x: np.ndarray, positions: np.ndarray, inv_freq: np.ndarray) -> np.ndarray:
    """x [n, num_heads, head_dim] at positions [n] -> x * cos + rotate_half(x) * sin, where
    rotate_half([a, b]) = [-b, a] over the two halves of head_dim."""
    angles = positions.astype(np.float64)[:, None] * inv_freq[None, :]  # [n, head_dim / 2]
    cos = np.concatenate([np.cos(angles)] * 2, axis=-1)[:, None, :]  # [n, 1, head_dim]
    sin = np.concatenate([np.sin(angles)] * 2, axis=-1)[:, None, :]
    half = x.shape[-1] // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + rotated * sin


def causal_gqa_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, q_start: int) -> np.ndarray:
    """q [n, num_heads, d] at positions q_start.., k, v [num_ctx, num_kv_heads, d] at positions 0..;
    query i attends to keys 0..q_start+i. Returns [n, num_heads, d]."""
    n, num_heads, d = q.shape
    num_ctx, num_kv_heads, _ = k.shape
    group = num_heads // num_kv_heads
    qg = q.reshape(n, num_kv_heads, group, d).transpose(1, 2, 0, 3)  # [kv, group, n, d]
    kt = k.transpose(1, 2, 0)[:, None]  # [kv, 1, d, num_ctx]
    scores = (qg @ kt) / np.sqrt(d)  # [kv, group, n, num_ctx]
    masked = np.arange(num_ctx)[None, :] > (q_start + np.arange(n))[:, None]  # [n, num_ctx]
    scores = np.where(masked, -np.inf, scores)
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    probs = scores / scores.sum(axis=-1, keepdims=True)
    out = probs @ v.transpose(1, 0, 2)[:, None]  # [kv, group, n, d]
    return out.transpose(2, 0, 1, 3).reshape(n, num_heads, d)


# ---------------------------------------------------------------------------------------------------
# The model


@dataclasses.dataclass
class KvCache:
    """Rotated keys and values of the tokens fed so far, per layer: [len, num_kv_heads, head_dim]."""
    keys: list[np.ndarray]
    values: list[np.ndarray]

    @property
    def length(self) -> int:
        return self.keys[0].shape[0]


class ReferenceLlama:
    def __init__(self, config: LlamaConfig, weights: dict[str, np.ndarray]):
        """weights: HF tensor names -> arrays of any float dtype (kept as float64)."""
        self.config = config
        self._w = {name: np.asarray(w, dtype=np.float64) for name, w in weights.items()}
        if config.tie_word_embeddings:
            self._w["lm_head.weight"] = self._w["model.embed_tokens.weight"]
        self._inv_freq = rope_inv_freq(config.head_dim, config.rope_theta, config.rope_scaling)

    @staticmethod
    def from_dir(model_dir: Path | str) -> "ReferenceLlama":
        return ReferenceLlama(load_config(model_dir), load_weights(model_dir))

    def new_cache(self) -> KvCache:
        c = self.config
        empty = np.zeros((0, c.num_kv_heads, c.head_dim))
        return KvCache([empty] * c.num_layers, [empty] * c.num_layers)

    def forward(self, token_ids, cache: KvCache | None = None) -> np.ndarray:
        """Feeds token_ids after the cache's tokens (positions cache.length..) and appends their K/V
        to the cache (a fresh one when None). Returns [len(token_ids), vocab] float64 logits."""
        c = self.config
        cache = cache if cache is not None else self.new_cache()
        ids = np.asarray(token_ids, dtype=np.int64)
        if ids.ndim != 1 or ids.size == 0 or ids.min() < 0 or ids.max() >= c.vocab_size:
            raise ValueError(f"token ids must be a non-empty list in [0, {c.vocab_size})")
        start = cache.length
        positions = np.arange(start, start + ids.size)
        x = self._w["model.embed_tokens.weight"][ids]  # [n, hidden]
        for layer in range(c.num_layers):
            x = self._layer(layer, x, positions, cache)
        x = rms_norm(x, self._w["model.norm.weight"], c.rms_norm_eps)
        return x @ self._w["lm_head.weight"].T

    def logits(self, token_ids) -> np.ndarray:
        """[len(token_ids), vocab]: a full recompute without a persistent cache."""
        return self.forward(token_ids)

    def greedy(self, prompt_ids, num_tokens: int) -> tuple[list[int], np.ndarray]:
        """Greedy decoding with a KV cache: the generated ids and [num_tokens, vocab] logits, where row
        0 is the last prompt position's and row i follows feeding generated token i."""
        cache = self.new_cache()
        row = self.forward(prompt_ids, cache)[-1]
        tokens, rows = [], []
        for step in range(num_tokens):
            rows.append(row)
            tokens.append(int(np.argmax(row)))
            if step + 1 < num_tokens:
                row = self.forward([tokens[-1]], cache)[-1]
        return tokens, np.array(rows).reshape(num_tokens, self.config.vocab_size)

    def _layer(self, layer: int, x: np.ndarray, positions: np.ndarray, cache: KvCache) -> np.ndarray:
        c = self.config
        w = self._w
        p = f"model.layers.{layer}."
        n = x.shape[0]
        h = rms_norm(x, w[p + "input_layernorm.weight"], c.rms_norm_eps)
        q, k, v = (h @ w[p + f"self_attn.{m}_proj.weight"].T for m in "qkv")
        if c.attention_bias:
            q = q + w[p + "self_attn.q_proj.bias"]
            k = k + w[p + "self_attn.k_proj.bias"]
            v = v + w[p + "self_attn.v_proj.bias"]
        q = apply_rope(q.reshape(n, c.num_heads, c.head_dim), positions, self._inv_freq)
        k = apply_rope(k.reshape(n, c.num_kv_heads, c.head_dim), positions, self._inv_freq)
        v = v.reshape(n, c.num_kv_heads, c.head_dim)
        cache.keys[layer] = np.concatenate([cache.keys[layer], k])
        cache.values[layer] = np.concatenate([cache.values[layer], v])
        attn = causal_gqa_attention(q, cache.keys[layer], cache.values[layer], int(positions[0]))
        x = x + attn.reshape(n, c.num_heads * c.head_dim) @ w[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], c.rms_norm_eps)
        gate = h @ w[p + "mlp.gate_proj.weight"].T
        up = h @ w[p + "mlp.up_proj.weight"].T
        return x + (silu(gate) * up) @ w[p + "mlp.down_proj.weight"].T
