#!/usr/bin/env python3
"""Writes a LLaMA-family Hugging Face checkpoint as a GGUF file, so llama.cpp's llama-bench can run
the exact shapes baton_engine_bench runs, on the same machine, as a baseline.

Only what a speed comparison needs: LlamaForCausalLM / MistralForCausalLM without biases, a
byte-level BPE tokenizer.json, weights written as f32 or bf16 (norms stay f32, as llama.cpp keeps
them). Q and K rows are permuted from Hugging Face's rotate-half RoPE order to GGML's interleaved
one, as llama.cpp's own converter does, so the file also decodes correctly.

    python hf_to_gguf.py build/models/small /tmp/small-bf16.gguf --dtype bf16

Needs the `gguf`, `numpy` and `safetensors` packages from PyPI.
"""
import argparse
import json
import pathlib
import struct
import sys

import gguf
import numpy as np


def load_tensors(model_dir: pathlib.Path) -> dict[str, np.ndarray]:
    """Every tensor of the checkpoint's *.safetensors as numpy, read from the format's own header
    (safetensors' numpy loader refuses bf16, which numpy lacks: widened exactly to f32 here)."""
    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        sys.exit(f"hf_to_gguf: no *.safetensors in {model_dir}")
    tensors = {}
    for path in files:
        data = path.read_bytes()
        (header_len,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8:8 + header_len])
        body = data[8 + header_len:]
        for name, entry in header.items():
            if name == "__metadata__":
                continue
            begin, end = entry["data_offsets"]
            blob = body[begin:end]
            if entry["dtype"] == "BF16":
                values = (np.frombuffer(blob, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
            else:
                values = np.frombuffer(blob, dtype={"F32": np.float32, "F16": np.float16}[entry["dtype"]])
            tensors[name] = values.reshape(entry["shape"])
    return tensors


def permute_rope(w: np.ndarray, heads: int) -> np.ndarray:
    """Rotate-half pairs (i, i + d/2) -> interleaved pairs (2i, 2i + 1) within each head."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def to_bf16_bits(w: np.ndarray) -> np.ndarray:
    """Round-to-nearest-even f32 -> bf16, as raw uint16 (numpy has no bf16 dtype)."""
    bits = w.astype(np.float32).view(np.uint32)
    rounded = bits + 0x7FFF + ((bits >> 16) & 1)
    return (rounded >> 16).astype(np.uint16)


def add_tokenizer(writer: gguf.GGUFWriter, model_dir: pathlib.Path, config: dict) -> None:
    tok = json.loads((model_dir / "tokenizer.json").read_text())
    if tok["model"]["type"] != "BPE":
        sys.exit("hf_to_gguf: only BPE tokenizer.json is supported")
    vocab = dict(tok["model"]["vocab"])
    for added in tok.get("added_tokens", []):
        vocab[added["content"]] = added["id"]
    size = max(config["vocab_size"], max(vocab.values()) + 1)
    tokens = [f"[PAD{i}]" for i in range(size)]
    types = [gguf.TokenType.UNUSED] * size
    for text, idx in vocab.items():
        tokens[idx] = text
        types[idx] = gguf.TokenType.NORMAL
    for added in tok.get("added_tokens", []):
        types[added["id"]] = gguf.TokenType.CONTROL if added.get("special") else gguf.TokenType.USER_DEFINED
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"].get("merges", [])]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("llama-bpe")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    if config.get("bos_token_id") is not None:
        writer.add_bos_token_id(config["bos_token_id"])
    eos = config.get("eos_token_id")
    if eos is not None:
        writer.add_eos_token_id(eos[0] if isinstance(eos, list) else eos)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", type=pathlib.Path)
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    args = parser.parse_args()

    for name in ("config.json", "tokenizer.json"):
        if not (args.model_dir / name).is_file():
            sys.exit(f"hf_to_gguf: no {name} in {args.model_dir}")
    config = json.loads((args.model_dir / "config.json").read_text())
    arch = config.get("architectures", ["?"])[0]
    if arch not in ("LlamaForCausalLM", "MistralForCausalLM"):
        sys.exit(f"hf_to_gguf: unsupported architecture {arch}")
    heads, kv_heads = config["num_attention_heads"], config.get("num_key_value_heads", config["num_attention_heads"])
    hidden = config["hidden_size"]

    writer = gguf.GGUFWriter(str(args.out), "llama")
    writer.add_name(args.model_dir.name)
    writer.add_context_length(config.get("max_position_embeddings", 2048))
    writer.add_embedding_length(hidden)
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_dimension_count(config.get("head_dim", hidden // heads))
    writer.add_rope_freq_base(config.get("rope_theta", 10000.0))
    writer.add_layer_norm_rms_eps(config.get("rms_norm_eps", 1e-5))
    writer.add_vocab_size(config["vocab_size"])
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_BF16 if args.dtype == "bf16" else gguf.LlamaFileType.ALL_F32)
    add_tokenizer(writer, args.model_dir, config)

    names = {
        "model.embed_tokens.weight": "token_embd.weight",
        "model.norm.weight": "output_norm.weight",
        "lm_head.weight": "output.weight",
    }
    per_layer = {
        "input_layernorm.weight": "attn_norm.weight",
        "self_attn.q_proj.weight": "attn_q.weight",
        "self_attn.k_proj.weight": "attn_k.weight",
        "self_attn.v_proj.weight": "attn_v.weight",
        "self_attn.o_proj.weight": "attn_output.weight",
        "post_attention_layernorm.weight": "ffn_norm.weight",
        "mlp.gate_proj.weight": "ffn_gate.weight",
        "mlp.up_proj.weight": "ffn_up.weight",
        "mlp.down_proj.weight": "ffn_down.weight",
    }
    for layer in range(config["num_hidden_layers"]):
        for hf, gg in per_layer.items():
            names[f"model.layers.{layer}.{hf}"] = f"blk.{layer}.{gg}"

    tensors = load_tensors(args.model_dir)
    for hf_name, w in tensors.items():
        if hf_name not in names:
            sys.exit(f"hf_to_gguf: unexpected tensor {hf_name}")
        w = w.astype(np.float32)
        if hf_name.endswith("q_proj.weight"):
            w = permute_rope(w, heads)
        elif hf_name.endswith("k_proj.weight"):
            w = permute_rope(w, kv_heads)
        if args.dtype == "bf16" and w.ndim == 2:
            writer.add_tensor(names[hf_name], to_bf16_bits(w), raw_shape=w.shape,
                              raw_dtype=gguf.GGMLQuantizationType.BF16)
        else:
            writer.add_tensor(names[hf_name], w)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    main()
