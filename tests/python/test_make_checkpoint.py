"""Checks scripts/make_checkpoint.py: the files a Hugging Face checkpoint has, with the contents the
loaders expect; dtype conversion and sharding; determinism; and that the random models are healthy
(finite, peaked logits; greedy decoding that does not collapse)."""

from __future__ import annotations

import filecmp
import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
from safetensors.numpy import load_file
from tokenizers import Tokenizer

from reference_llama import ReferenceLlama, load_weights, read_safetensors

EXPECTED_SHAPES = {  # name: (arch, hidden, layers, heads, kv heads, ffn, tied, eps, theta)
    "tiny": ("LlamaForCausalLM", 288, 6, 6, 6, 768, False, 1e-5, 10000.0),
    "small": ("LlamaForCausalLM", 768, 12, 12, 4, 2048, False, 1e-5, 10000.0),
    "qwen2-tiny": ("Qwen2ForCausalLM", 256, 4, 8, 2, 704, True, 1e-6, 1000000.0),
}


@pytest.mark.parametrize("name", sorted(EXPECTED_SHAPES))
def test_config_files(name, models_dir):
    arch, hidden, layers, heads, kv_heads, ffn, tied, eps, theta = EXPECTED_SHAPES[name]
    model = models_dir / name
    config = json.loads((model / "config.json").read_text())
    assert config["architectures"] == [arch]
    assert config["model_type"] == ("qwen2" if arch.startswith("Qwen2") else "llama")
    assert (config["hidden_size"], config["num_hidden_layers"], config["num_attention_heads"],
            config["num_key_value_heads"], config["intermediate_size"]) == (hidden, layers, heads,
                                                                             kv_heads, ffn)
    assert config["tie_word_embeddings"] is tied
    assert config["rms_norm_eps"] == eps and config["rope_theta"] == theta
    assert config["rope_scaling"] is None
    assert config["max_position_embeddings"] == 2048 and config["vocab_size"] == 32000
    assert config["torch_dtype"] == "float32"
    generation = json.loads((model / "generation_config.json").read_text())
    assert (generation["bos_token_id"], generation["eos_token_id"]) == (config["bos_token_id"],
                                                                       config["eos_token_id"])
    # The special tokens of the config are the tokenizer's.
    tokenizer = Tokenizer.from_file(str(model / "tokenizer.json"))
    tokenizer_config = json.loads((model / "tokenizer_config.json").read_text())
    assert tokenizer.token_to_id(tokenizer_config["bos_token"]) == config["bos_token_id"]
    assert tokenizer.token_to_id(tokenizer_config["eos_token"]) == config["eos_token_id"]


@pytest.mark.parametrize("name", sorted(EXPECTED_SHAPES))
def test_weights_have_hf_names_and_shapes(name, models_dir):
    arch, hidden, layers, heads, kv_heads, ffn, tied, _, _ = EXPECTED_SHAPES[name]
    head_dim = hidden // heads
    weights = load_file(str(models_dir / name / "model.safetensors"))  # The safetensors package.
    expected = {"model.embed_tokens.weight": (32000, hidden), "model.norm.weight": (hidden,)}
    if not tied:
        expected["lm_head.weight"] = (32000, hidden)
    for i in range(layers):
        p = f"model.layers.{i}."
        expected.update({
            p + "input_layernorm.weight": (hidden,),
            p + "post_attention_layernorm.weight": (hidden,),
            p + "self_attn.q_proj.weight": (heads * head_dim, hidden),
            p + "self_attn.k_proj.weight": (kv_heads * head_dim, hidden),
            p + "self_attn.v_proj.weight": (kv_heads * head_dim, hidden),
            p + "self_attn.o_proj.weight": (hidden, heads * head_dim),
            p + "mlp.gate_proj.weight": (ffn, hidden),
            p + "mlp.up_proj.weight": (ffn, hidden),
            p + "mlp.down_proj.weight": (hidden, ffn),
        })
        if arch.startswith("Qwen2"):
            expected.update({p + "self_attn.q_proj.bias": (heads * head_dim,),
                             p + "self_attn.k_proj.bias": (kv_heads * head_dim,),
                             p + "self_attn.v_proj.bias": (kv_heads * head_dim,)})
    assert {k: v.shape for k, v in weights.items()} == expected
    assert all(v.dtype == np.float32 and np.isfinite(v).all() for v in weights.values())
    # Our own reader (used by the reference) agrees with the safetensors package.
    ours = read_safetensors(models_dir / name / "model.safetensors")
    assert all(np.array_equal(ours[k], weights[k]) for k in weights)


def test_tokenizer_is_llama3_style_byte_level_bpe(models_dir):
    tokenizer = Tokenizer.from_file(str(models_dir / "tiny" / "tokenizer.json"))
    assert tokenizer.get_vocab_size() == 32000
    spec = json.loads((models_dir / "tiny" / "tokenizer.json").read_text())
    assert spec["model"]["type"] == "BPE"
    assert [p["type"] for p in spec["pre_tokenizer"]["pretokenizers"]] == ["Split", "ByteLevel"]
    assert spec["decoder"]["type"] == "ByteLevel"
    text = "The GNU General Public License, version 3 — héllo 日本語 🙂\n\tdone."
    encoding = tokenizer.encode(text)
    assert encoding.ids[0] == tokenizer.token_to_id("<|begin_of_text|>")
    assert tokenizer.encode(text, add_special_tokens=False).ids == encoding.ids[1:]
    assert tokenizer.decode(encoding.ids) == text
    assert len(encoding.ids) < len(text.encode()) // 2, "trained merges should compress English text"


def test_dtypes_and_shards(tmp_path, models_dir, make_checkpoint_module):
    mc = make_checkpoint_module
    shutil.copytree(models_dir / ".tokenizer-cache", tmp_path / ".tokenizer-cache")
    reference = load_weights(models_dir / "qwen2-tiny")
    mc.write_checkpoint(tmp_path / "bf16", "qwen2-tiny", dtype="bf16", shards=3)
    mc.write_checkpoint(tmp_path / "f16", "qwen2-tiny", dtype="f16")

    index = json.loads((tmp_path / "bf16" / "model.safetensors.index.json").read_text())
    files = sorted(set(index["weight_map"].values()))
    assert files == [f"model-0000{k}-of-00003.safetensors" for k in (1, 2, 3)]
    assert set(index["weight_map"]) == set(reference)
    assert index["metadata"]["total_size"] == sum(w.size * 2 for w in reference.values())
    bf16 = load_weights(tmp_path / "bf16")
    assert json.loads((tmp_path / "bf16" / "config.json").read_text())["torch_dtype"] == "bfloat16"
    for name, exact in reference.items():
        # Round to nearest: within half a bfloat16 ulp (8 significant bits) of the f32 value.
        half_ulp = np.ldexp(1.0, np.frexp(exact.astype(np.float64))[1] - 9)
        assert np.all(np.abs(bf16[name].astype(np.float64) - exact) <= half_ulp), name
        assert np.all((bf16[name].view(np.uint32) & 0xFFFF) == 0), name

    f16 = load_file(str(tmp_path / "f16" / "model.safetensors"))
    assert all(np.array_equal(f16[k], reference[k].astype(np.float16)) for k in reference)


def test_split_shards(make_checkpoint_module):
    split = make_checkpoint_module.split_shards
    names = [f"t{i}" for i in range(6)]
    for sizes in ([100, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 100], [5] * 6):
        size_of = dict(zip(names, sizes))
        for num_shards in range(1, 7):
            shards = split(names, size_of, num_shards)
            assert len(shards) == num_shards and all(shards)
            assert [n for s in shards for n in s] == names
    equal = split(names, dict(zip(names, [5] * 6)), 3)
    assert equal == [["t0", "t1"], ["t2", "t3"], ["t4", "t5"]]
    with pytest.raises(ValueError):
        split(names, dict(zip(names, [5] * 6)), 7)


def test_same_arguments_give_the_same_bytes(tmp_path, models_dir, repo_root):
    # A fresh tokenizer cache: the BPE training itself must be deterministic too.
    subprocess.run([sys.executable, str(repo_root / "scripts" / "make_checkpoint.py"), "--shape",
                    "qwen2-tiny", "--out", str(tmp_path / "qwen2-tiny")], check=True)
    comparison = filecmp.dircmp(tmp_path / "qwen2-tiny", models_dir / "qwen2-tiny")
    assert sorted(comparison.common) == sorted(p.name for p in (models_dir / "qwen2-tiny").iterdir())
    _, mismatch, errors = filecmp.cmpfiles(tmp_path / "qwen2-tiny", models_dir / "qwen2-tiny",
                                           comparison.common, shallow=False)
    assert mismatch == [] and errors == []


def test_all_skips_complete_models_and_regenerates_stale_ones(tmp_path, make_checkpoint_module):
    mc = make_checkpoint_module
    want = mc.stamp("tiny", "f32", 0, 1, None)
    assert not mc.is_complete(tmp_path / "tiny", want)
    (tmp_path / "tiny").mkdir()
    (tmp_path / "tiny" / mc.STAMP_FILE).write_text(json.dumps(want))
    assert mc.is_complete(tmp_path / "tiny", want)
    assert not mc.is_complete(tmp_path / "tiny", mc.stamp("tiny", "f32", 1, 1, None))


@pytest.mark.parametrize("argv", [["--shape", "tiny"], ["--out", "x"], ["--all", "x", "--shape", "tiny"],
                                  ["--shape", "tiny", "--out", "x", "--shards", "0"]])
def test_bad_command_lines_exit_2(argv, make_checkpoint_module):
    with pytest.raises(SystemExit) as exit_info:
        make_checkpoint_module.main(argv)
    assert exit_info.value.code == 2


def test_llama3_rope_scaling_block(make_checkpoint_module):
    config = make_checkpoint_module.make_config(make_checkpoint_module.SHAPES["tiny"], "f32", "llama3")
    assert config["rope_scaling"] == {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                                      "original_max_position_embeddings": 256, "rope_type": "llama3"}


@pytest.mark.parametrize("name", ["tiny", "qwen2-tiny"])
def test_random_models_are_healthy(name, models_dir):
    model = ReferenceLlama.from_dir(models_dir / name)
    rng = np.random.default_rng(11)
    logits = model.logits([int(t) for t in rng.integers(2, 32000, 200)])
    assert np.isfinite(logits).all()
    assert 3.0 < logits.std() < 5.0
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    assert 0.05 < np.median(probs.max(axis=1)) < 0.6
    top_two = np.sort(logits, axis=1)[:, -2:]
    assert np.median(top_two[:, 1] - top_two[:, 0]) > 0.3, "greedy decoding would be near-tie bound"
    for seed in range(2):
        prompt = [int(t) for t in np.random.default_rng(seed).integers(2, 32000, 17)]
        tokens, _ = model.greedy(prompt, 48)
        assert len(set(tokens)) >= 12, f"greedy decoding collapsed: {tokens}"
