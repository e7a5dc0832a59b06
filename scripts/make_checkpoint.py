#!/usr/bin/env python3
"""Writes a small, seeded-random LLaMA-family checkpoint in Hugging Face format (the test models).

    python scripts/make_checkpoint.py --shape tiny|small|qwen2-tiny [--dtype f32|bf16|f16] [--seed N]
        [--shards N] [--rope-scaling llama3] --out DIR
    python scripts/make_checkpoint.py --all DIR      # tiny, small, qwen2-tiny into DIR/<name>

A model directory holds what transformers and tokenizers write for LlamaForCausalLM / Qwen2ForCausalLM:
config.json, generation_config.json, model.safetensors (or model-0000K-of-0000N.safetensors plus
model.safetensors.index.json with --shards N), tokenizer.json and tokenizer_config.json. It also holds
.baton-checkpoint.json, the generator arguments, which --all uses to skip models that are already
complete. A model is written into a temporary sibling directory and renamed into place, so a directory
that exists is complete.

Determinism: the same arguments on the same machine give the same bytes. The tokenizer is trained on
text that ships with the machine's Debian packages (see `collect_corpus`), so another machine with other
packages installed gets another (equally valid) tokenizer; the weights do not depend on it.

Weight initialisation (all normal, from numpy's default_rng(seed), drawn in the fixed order of
`tensor_names`; fan_in is a matrix's input width, H = hidden_size):
  * embed_tokens: std 1 (untied), so the residual stream starts at RMS ~1.
  * q_proj, k_proj: std sqrt(SCORE_STD / H). The attention scores q.k/sqrt(head_dim) then have a std of
    ~SCORE_STD (2): attention is clearly position- and content-dependent (not near-uniform), so RoPE,
    the causal mask and GQA all shape the output; a bug in any of them moves the logits a lot.
  * v_proj, gate_proj, up_proj: std 1/sqrt(fan_in) (unit-variance outputs).
  * o_proj, down_proj: std R/sqrt(fan_in). Untied models: R = 1 = the embedding std, so each
    sub-layer adds about as much as the residual already holds; every layer matters, none dominates.
  * lm_head: std LOGIT_STD/sqrt(H): the logits have a std of ~LOGIT_STD (4). Over 32000 tokens the
    top-two gap is then typically ~0.65, while f32 rounding moves a logit by ~1e-4: greedy decoding is
    not decided by near-ties.
  * Tied models (qwen2-tiny) use the embedding as lm_head, so the embedding std is LOGIT_STD/sqrt(H)
    (~0.25). Its own token then scores e.e = LOGIT_STD^2 = 16 against ~4 for the others unless the
    layers outweigh the embedding in the final residual: R = TIED_RESIDUAL_GAIN (3, ~12x the
    embedding std). With R = 0.25 the model only ever repeats its input token; with R = 1 greedy
    decoding often loops over a handful of tokens; with R = 3 it visits ~25-50 distinct tokens in 64
    steps.
  * RMSNorm weights: 1 + 0.05 * N(0, 1); Qwen2 q/k/v biases: std 0.2 (small but far from negligible).
Measured with the reference forward pass (tests/python/reference_llama.py) on 300 random tokens:
logits std 4.0, median top-1 probability ~0.2, median top-two gap ~0.65, and greedy decoding from a
random prompt does not fall into a short loop (tested in tests/python/test_make_checkpoint.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import gzip
import hashlib
import json
import os
import shutil
import struct
import sys
from pathlib import Path
from typing import Iterator

import numpy as np

GENERATOR_VERSION = 2  # 2: tokenizer_config.json carries a chat template
SCORE_STD = 2.0
LOGIT_STD = 4.0
NORM_NOISE_STD = 0.05
BIAS_STD = 0.2
TIED_RESIDUAL_GAIN = 3.0
VOCAB_SIZE = 32000
MAX_POSITION_EMBEDDINGS = 2048
BOS_TOKEN = "<|begin_of_text|>"
EOS_TOKEN = "<|end_of_text|>"
# The tokenizer trainer puts the special tokens first, in this order.
BOS_TOKEN_ID = 0
EOS_TOKEN_ID = 1
# Llama-3's pre-tokenizer regex (as in Meta-Llama-3's tokenizer.json).
LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
CORPUS_MAX_BYTES = 24_000_000  # ~8 s of BPE training on 2 cores.
TRANSFORMERS_VERSION = "4.46.0"  # The version our config files imitate.
STAMP_FILE = ".baton-checkpoint.json"


@dataclasses.dataclass(frozen=True)
class ModelShape:
    architecture: str  # "LlamaForCausalLM" | "Qwen2ForCausalLM"
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    @property
    def is_qwen2(self) -> bool:
        return self.architecture == "Qwen2ForCausalLM"


SHAPES = {
    "tiny": ModelShape("LlamaForCausalLM", 288, 6, 6, 6, 768, VOCAB_SIZE, False),
    "small": ModelShape("LlamaForCausalLM", 768, 12, 12, 4, 2048, VOCAB_SIZE, False),
    "qwen2-tiny": ModelShape("Qwen2ForCausalLM", 256, 4, 8, 2, 704, VOCAB_SIZE, True),
}

DTYPES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}  # --dtype -> torch_dtype


# ---------------------------------------------------------------------------------------------------
# config.json, generation_config.json


def llama3_rope_scaling() -> dict:
    """The Llama-3.1 rope_scaling block, scaled to our models: Llama-3.1 has factor 8 and an original
    context of 8192 (its wavelength thresholds 8192 and 2048 exceed every wavelength a 48-dim head
    reaches at the positions tests use); ours keeps the factors and sets the original context to 256 =
    max_position_embeddings / factor, so the scaled, smoothed and untouched frequency bands all occur."""
    return {
        "factor": 8.0,
        "high_freq_factor": 4.0,
        "low_freq_factor": 1.0,
        "original_max_position_embeddings": MAX_POSITION_EMBEDDINGS // 8,
        "rope_type": "llama3",
    }


def make_config(shape: ModelShape, dtype: str, rope_scaling: str | None) -> dict:
    """config.json as transformers writes it for this architecture."""
    common = {
        "architectures": [shape.architecture],
        "attention_dropout": 0.0,
        "bos_token_id": BOS_TOKEN_ID,
        "eos_token_id": EOS_TOKEN_ID,
        "hidden_act": "silu",
        "hidden_size": shape.hidden_size,
        "initializer_range": 0.02,
        "intermediate_size": shape.intermediate_size,
        "max_position_embeddings": MAX_POSITION_EMBEDDINGS,
        "num_attention_heads": shape.num_heads,
        "num_hidden_layers": shape.num_layers,
        "num_key_value_heads": shape.num_kv_heads,
        "rope_scaling": llama3_rope_scaling() if rope_scaling == "llama3" else None,
        "tie_word_embeddings": shape.tie_word_embeddings,
        "torch_dtype": DTYPES[dtype],
        "transformers_version": TRANSFORMERS_VERSION,
        "use_cache": True,
        "vocab_size": shape.vocab_size,
    }
    if shape.is_qwen2:
        common.update({
            "max_window_layers": shape.num_layers,
            "model_type": "qwen2",
            "rms_norm_eps": 1e-6,
            "rope_theta": 1000000.0,
            "sliding_window": MAX_POSITION_EMBEDDINGS,
            "use_sliding_window": False,
        })
    else:
        common.update({
            "attention_bias": False,
            "head_dim": shape.head_dim,
            "mlp_bias": False,
            "model_type": "llama",
            "pretraining_tp": 1,
            "rms_norm_eps": 1e-5,
            "rope_theta": 10000.0,
        })
    return common


def make_generation_config() -> dict:
    return {
        "_from_model_config": True,
        "bos_token_id": BOS_TOKEN_ID,
        "eos_token_id": EOS_TOKEN_ID,
        "transformers_version": TRANSFORMERS_VERSION,
    }


def dump_json(obj: dict) -> str:
    """transformers' to_json_string: sorted keys, indent 2, trailing newline."""
    return json.dumps(obj, indent=2, sort_keys=True) + "\n"


# ---------------------------------------------------------------------------------------------------
# Weights


def tensor_names(shape: ModelShape) -> Iterator[tuple[str, tuple[int, ...]]]:
    """(name, shape) of every stored tensor, in the order the weights are drawn and stored."""
    h, f, d = shape.hidden_size, shape.intermediate_size, shape.head_dim
    q_dim, kv_dim = shape.num_heads * d, shape.num_kv_heads * d
    yield "model.embed_tokens.weight", (shape.vocab_size, h)
    for i in range(shape.num_layers):
        p = f"model.layers.{i}."
        yield p + "input_layernorm.weight", (h,)
        yield p + "self_attn.q_proj.weight", (q_dim, h)
        yield p + "self_attn.k_proj.weight", (kv_dim, h)
        yield p + "self_attn.v_proj.weight", (kv_dim, h)
        if shape.is_qwen2:
            yield p + "self_attn.q_proj.bias", (q_dim,)
            yield p + "self_attn.k_proj.bias", (kv_dim,)
            yield p + "self_attn.v_proj.bias", (kv_dim,)
        yield p + "self_attn.o_proj.weight", (h, q_dim)
        yield p + "post_attention_layernorm.weight", (h,)
        yield p + "mlp.gate_proj.weight", (f, h)
        yield p + "mlp.up_proj.weight", (f, h)
        yield p + "mlp.down_proj.weight", (h, f)
    yield "model.norm.weight", (h,)
    if not shape.tie_word_embeddings:
        yield "lm_head.weight", (shape.vocab_size, h)


def init_std(shape: ModelShape, name: str, dims: tuple[int, ...]) -> float:
    """The normal std of a weight matrix or bias (see the module docstring)."""
    h = shape.hidden_size
    embed_std = LOGIT_STD / np.sqrt(h) if shape.tie_word_embeddings else 1.0
    if name.endswith(".bias"):
        return BIAS_STD
    if name == "model.embed_tokens.weight":
        return embed_std
    if name == "lm_head.weight":
        return LOGIT_STD / np.sqrt(h)
    fan_in = dims[1]
    if name.endswith(("q_proj.weight", "k_proj.weight")):
        return np.sqrt(SCORE_STD / h)
    if name.endswith(("o_proj.weight", "down_proj.weight")):
        return (TIED_RESIDUAL_GAIN if shape.tie_word_embeddings else 1.0) / np.sqrt(fan_in)
    return 1.0 / np.sqrt(fan_in)  # v, gate, up


def init_weights(shape: ModelShape, seed: int) -> dict[str, np.ndarray]:
    """All tensors as float32, drawn from default_rng(seed) in `tensor_names` order."""
    rng = np.random.default_rng(seed)
    weights = {}
    for name, dims in tensor_names(shape):
        noise = rng.standard_normal(dims, dtype=np.float32)
        if name.endswith("layernorm.weight") or name == "model.norm.weight":
            weights[name] = 1.0 + np.float32(NORM_NOISE_STD) * noise
        else:
            weights[name] = np.float32(init_std(shape, name, dims)) * noise
    return weights


def f32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns (uint16), round to nearest even (as torch's .to(bfloat16)).
    Our weights are finite, so NaN handling is not needed."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounding = np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
    return ((bits + rounding) >> np.uint32(16)).astype(np.uint16)


# ---------------------------------------------------------------------------------------------------
# safetensors


def save_safetensors(path: Path, tensors: dict[str, np.ndarray], dtype: str) -> None:
    """Writes `tensors` (float32) converted to `dtype`. f32/f16 go through the safetensors package;
    numpy has no bfloat16, so safetensors.numpy cannot write BF16 and we write that format ourselves
    (8-byte little-endian header length, JSON header, then the raw little-endian data)."""
    if dtype == "f32" or dtype == "f16":
        from safetensors.numpy import save_file

        np_dtype = np.float32 if dtype == "f32" else np.float16
        save_file({k: v.astype(np_dtype) for k, v in tensors.items()}, str(path),
                  metadata={"format": "pt"})
        return
    header: dict = {"__metadata__": {"format": "pt"}}
    offset = 0
    payload = []
    for name in sorted(tensors):
        data = f32_to_bf16_bits(tensors[name]).tobytes()
        header[name] = {"dtype": "BF16", "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(data)]}
        payload.append(data)
        offset += len(data)
    header_bytes = json.dumps(header, separators=(",", ":")).encode()
    header_bytes += b" " * (-len(header_bytes) % 8)  # The data section starts 8-byte aligned.
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header_bytes)))
        f.write(header_bytes)
        for data in payload:
            f.write(data)


def split_shards(names: list[str], sizes: dict[str, int], num_shards: int) -> list[list[str]]:
    """Splits `names` (in order) into num_shards non-empty runs of roughly equal byte size: a new
    shard starts once the bytes so far reach its share, or when every remaining tensor is needed to
    give each remaining shard one."""
    if not 1 <= num_shards <= len(names):
        raise ValueError(f"--shards must be in [1, {len(names)}], got {num_shards}")
    total = sum(sizes.values())
    shards: list[list[str]] = [[]]
    done = 0
    for idx, name in enumerate(names):
        shards_to_open = num_shards - len(shards)
        if shards[-1] and shards_to_open > 0 and (done * num_shards >= len(shards) * total
                                                   or len(names) - idx == shards_to_open):
            shards.append([])
        shards[-1].append(name)
        done += sizes[name]
    return shards


def write_weights(out: Path, weights: dict[str, np.ndarray], dtype: str, num_shards: int) -> None:
    if num_shards == 1:
        save_safetensors(out / "model.safetensors", weights, dtype)
        return
    itemsize = 4 if dtype == "f32" else 2
    sizes = {name: w.size * itemsize for name, w in weights.items()}
    weight_map = {}
    for k, names in enumerate(split_shards(list(weights), sizes, num_shards)):
        file_name = f"model-{k + 1:05d}-of-{num_shards:05d}.safetensors"
        save_safetensors(out / file_name, {n: weights[n] for n in names}, dtype)
        weight_map.update({n: file_name for n in names})
    index = {"metadata": {"total_size": sum(sizes.values())},
             "weight_map": dict(sorted(weight_map.items()))}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")


# ---------------------------------------------------------------------------------------------------
# Tokenizer


def collect_corpus(max_bytes: int = CORPUS_MAX_BYTES) -> list[str]:
    """Real English-ish text that ships with Debian: the common licenses, the packages' copyright
    files, then their gzip'd changelogs (each group sorted by path, identical files once), up to
    max_bytes."""
    paths = (sorted(glob.glob("/usr/share/common-licenses/*"))
             + sorted(glob.glob("/usr/share/doc/*/copyright"))
             + sorted(glob.glob("/usr/share/doc/*/changelog*.gz")))
    seen, texts, total = set(), [], 0
    for path in paths:
        if total >= max_bytes:
            break
        try:
            raw = gzip.open(path).read() if path.endswith(".gz") else Path(path).read_bytes()
        except OSError:
            continue  # Dangling symlinks, unreadable or corrupt files: not our concern.
        digest = hashlib.sha256(raw).digest()
        if digest in seen:
            continue
        seen.add(digest)
        texts.append(raw.decode("utf-8", errors="replace"))
        total += len(raw)
    if total < max_bytes // 4:
        raise RuntimeError(f"found only {total} bytes of text under /usr/share to train the tokenizer")
    return texts


def train_tokenizer(texts: list[str], vocab_size: int,
                    special_tokens: tuple[str, ...] = (BOS_TOKEN, EOS_TOKEN)):
    """A Llama-3-style byte-level BPE: Split(Llama-3 regex) + ByteLevel pre-tokenizer, ByteLevel
    decoder, TemplateProcessing that prepends <|begin_of_text|>; the specials get ids 0, 1, ... in
    order (BOS first, EOS second)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
    ])
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(texts, trainer)
    if tokenizer.get_vocab_size() != vocab_size:
        raise RuntimeError(f"tokenizer has {tokenizer.get_vocab_size()} tokens, want {vocab_size}: "
                           "not enough training text")
    assert [tokenizer.token_to_id(t) for t in special_tokens] == list(range(len(special_tokens)))
    assert special_tokens[:2] == (BOS_TOKEN, EOS_TOKEN)
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{BOS_TOKEN} $A", pair=f"{BOS_TOKEN} $A {BOS_TOKEN}:1 $B:1",
        special_tokens=[(BOS_TOKEN, BOS_TOKEN_ID)])
    return tokenizer


def cached_tokenizer_json(cache_dir: Path, vocab_size: int) -> str:
    """The tokenizer.json text; trained once per corpus, vocab size and tokenizers version, then
    read from cache_dir."""
    import tokenizers

    texts = collect_corpus()
    key = hashlib.sha256()
    key.update(f"v{GENERATOR_VERSION} {vocab_size} {tokenizers.__version__} {LLAMA3_PATTERN}".encode())
    for text in texts:
        key.update(hashlib.sha256(text.encode()).digest())
    path = cache_dir / f"tokenizer-{key.hexdigest()[:16]}.json"
    if path.exists():
        return path.read_text()
    text = train_tokenizer(texts, vocab_size).to_str(pretty=True)
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)
    return text


# A Llama-3-style chat template of our own, so that /v1/chat/completions serves the generated models
# (the model was never trained on it: the point is the plumbing, not the answers).
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "<|start_header_id|>{{ message['role'] }}<|end_header_id|>\n\n"
    "{% if message['content'] is string %}{{ message['content'] | trim }}"
    "{% else %}{% for part in message['content'] %}{% if part['type'] == 'text' %}{{ part['text'] | trim }}"
    "{% endif %}{% endfor %}{% endif %}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}")


def make_tokenizer_config() -> dict:
    """tokenizer_config.json as transformers writes it for a PreTrainedTokenizerFast."""
    def added(content: str) -> dict:
        return {"content": content, "lstrip": False, "normalized": False, "rstrip": False,
                "single_word": False, "special": True}

    return {
        "added_tokens_decoder": {str(BOS_TOKEN_ID): added(BOS_TOKEN), str(EOS_TOKEN_ID): added(EOS_TOKEN)},
        "bos_token": BOS_TOKEN,
        "clean_up_tokenization_spaces": True,
        "eos_token": EOS_TOKEN,
        "model_input_names": ["input_ids", "attention_mask"],
        "model_max_length": MAX_POSITION_EMBEDDINGS,
        "tokenizer_class": "PreTrainedTokenizerFast",
        "chat_template": CHAT_TEMPLATE,
    }


# ---------------------------------------------------------------------------------------------------
# Driver


def stamp(shape_name: str, dtype: str, seed: int, shards: int, rope_scaling: str | None) -> dict:
    return {"generator_version": GENERATOR_VERSION, "shape": shape_name, "dtype": dtype, "seed": seed,
            "shards": shards, "rope_scaling": rope_scaling}


def is_complete(out: Path, expected_stamp: dict) -> bool:
    try:
        return json.loads((out / STAMP_FILE).read_text()) == expected_stamp
    except (OSError, ValueError):
        return False


def write_checkpoint(out: Path, shape_name: str, dtype: str = "f32", seed: int = 0, shards: int = 1,
                     rope_scaling: str | None = None) -> None:
    """Writes the model into `out` (replacing it), via a temporary sibling directory."""
    shape = SHAPES[shape_name]
    out = out.resolve()
    tokenizer_json = cached_tokenizer_json(out.parent / ".tokenizer-cache", shape.vocab_size)
    tmp = out.parent / f".{out.name}.tmp{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        (tmp / "config.json").write_text(dump_json(make_config(shape, dtype, rope_scaling)))
        (tmp / "generation_config.json").write_text(dump_json(make_generation_config()))
        (tmp / "tokenizer.json").write_text(tokenizer_json)
        (tmp / "tokenizer_config.json").write_text(dump_json(make_tokenizer_config()))
        write_weights(tmp, init_weights(shape, seed), dtype, shards)
        (tmp / STAMP_FILE).write_text(dump_json(stamp(shape_name, dtype, seed, shards, rope_scaling)))
        for f in tmp.iterdir():
            f.chmod(0o644)  # safetensors creates its files owner-only.
        shutil.rmtree(out, ignore_errors=True)
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", choices=sorted(SHAPES))
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="f32")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shards", type=int, default=1)
    parser.add_argument("--rope-scaling", choices=["llama3"], default=None)
    parser.add_argument("--out", type=Path, help="the model directory to write (replaced)")
    parser.add_argument("--all", type=Path, metavar="DIR",
                        help="write every shape into DIR/<shape> (f32, other flags apply), skipping "
                             "complete ones")
    args = parser.parse_args(argv)
    if (args.all is None) == (args.out is None):
        parser.error("give exactly one of --out and --all")
    if args.out is not None and args.shape is None:
        parser.error("--out needs --shape")
    if args.all is not None and args.shape is not None:
        parser.error("--all writes every shape; do not give --shape")
    if args.shards < 1:
        parser.error("--shards must be >= 1")

    jobs = ([(args.out, args.shape)] if args.out is not None
            else [(args.all / name, name) for name in SHAPES])
    for out, shape_name in jobs:
        want = stamp(shape_name, args.dtype, args.seed, args.shards, args.rope_scaling)
        if args.all is not None and is_complete(out, want):
            print(f"{out}: up to date", file=sys.stderr)
            continue
        write_checkpoint(out, shape_name, args.dtype, args.seed, args.shards, args.rope_scaling)
        print(f"{out}: written", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
