"""benchmarks/engine/hf_to_gguf.py: the GGUF it writes holds the checkpoint's config, tokenizer and
weights (Q/K rows in GGML's RoPE order, bf16 rounded to nearest even), read back with gguf's own
reader; a directory without a config or an architecture it cannot convert is a one-line error."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from safetensors.numpy import load_file

gguf = pytest.importorskip("gguf")


def convert(repo_root, model_dir, out, dtype):
    return subprocess.run([sys.executable, str(repo_root / "benchmarks/engine/hf_to_gguf.py"),
                           str(model_dir), str(out), "--dtype", dtype],
                          capture_output=True, text=True, timeout=300)


def hf_tensors(model_dir):
    tensors = {}
    for path in sorted(model_dir.glob("*.safetensors")):
        tensors.update(load_file(str(path)))
    return tensors


def unpermute_rope(w, heads):
    """Inverse of the converter's rotate-half -> interleaved permutation of Q/K rows."""
    return w.reshape(heads, w.shape[0] // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def bf16_bits(w):
    bits = w.astype(np.float32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_converts_config_tokenizer_and_weights(repo_root, models_dir, tmp_path, dtype):
    model_dir = models_dir / "tiny"
    out = tmp_path / f"tiny-{dtype}.gguf"
    proc = convert(repo_root, model_dir, out, dtype)
    assert proc.returncode == 0, proc.stderr
    config = json.loads((model_dir / "config.json").read_text())
    reader = gguf.GGUFReader(str(out))

    def field(name):
        return reader.fields[name].contents()

    assert field("general.architecture") == "llama"
    assert field("llama.block_count") == config["num_hidden_layers"]
    assert field("llama.embedding_length") == config["hidden_size"]
    assert field("llama.feed_forward_length") == config["intermediate_size"]
    assert field("llama.attention.head_count") == config["num_attention_heads"]
    assert field("llama.attention.head_count_kv") == config["num_key_value_heads"]
    assert len(reader.fields["tokenizer.ggml.tokens"].data) == config["vocab_size"]

    hf = hf_tensors(model_dir)
    ours = {t.name: t for t in reader.tensors}
    assert len(ours) == len(hf)
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    for hf_name, gg_name, unpermute in [
        ("model.embed_tokens.weight", "token_embd.weight", None),
        ("model.layers.0.self_attn.q_proj.weight", "blk.0.attn_q.weight", heads),
        ("model.layers.5.self_attn.k_proj.weight", "blk.5.attn_k.weight", kv_heads),
        ("model.layers.3.mlp.down_proj.weight", "blk.3.ffn_down.weight", None),
        ("model.norm.weight", "output_norm.weight", None),
    ]:
        expected = hf[hf_name].astype(np.float32)
        tensor = ours[gg_name]
        if dtype == "bf16" and expected.ndim == 2:
            got = tensor.data.view(np.uint16).reshape(expected.shape)
            expected = bf16_bits(expected)
        else:
            got = np.asarray(tensor.data).reshape(expected.shape)
        if unpermute is not None:
            got = unpermute_rope(got, unpermute)
        np.testing.assert_array_equal(got, expected, err_msg=gg_name)


def test_unsupported_architecture_is_a_one_line_error(repo_root, checkpoint_variant, tmp_path):
    qwen2 = checkpoint_variant("qwen2-tiny", shape="qwen2-tiny")
    proc = convert(repo_root, qwen2, tmp_path / "q.gguf", "f32")
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines() == ["hf_to_gguf: unsupported architecture Qwen2ForCausalLM"]


def test_missing_config_is_a_one_line_error(repo_root, tmp_path):
    proc = convert(repo_root, tmp_path, tmp_path / "x.gguf", "f32")
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines() == [f"hf_to_gguf: no config.json in {tmp_path}"]
