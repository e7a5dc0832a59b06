"""Checks the NumPy reference (reference_llama.py) against itself and against a brute-force
per-token, per-head loop written separately here, so that the engine is compared with something that
is right. No engine involved."""

from __future__ import annotations

import math

import numpy as np
import pytest

from reference_llama import (KvCache, LlamaConfig, ReferenceLlama, apply_rope, load_config,
                             load_weights, rope_inv_freq)

LLAMA3_SCALING = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": 256, "rope_type": "llama3"}


@pytest.fixture(scope="module")
def model_dirs(models_dir, checkpoint_variant):
    return {
        "tiny": models_dir / "tiny",
        "qwen2-tiny": models_dir / "qwen2-tiny",
        "tiny-llama3": checkpoint_variant("tiny-llama3-3shards", "tiny", shards=3,
                                          rope_scaling="llama3"),
    }


@pytest.fixture(scope="module")
def references(model_dirs):
    return {name: ReferenceLlama.from_dir(path) for name, path in model_dirs.items()}


def relative_error(actual: np.ndarray, expected: np.ndarray) -> float:
    return float(np.linalg.norm(actual - expected) / np.linalg.norm(expected))


def random_ids(n: int, seed: int, vocab: int = 32000) -> list[int]:
    return [int(t) for t in np.random.default_rng(seed).integers(2, vocab, n)]


# ---------------------------------------------------------------------------------------------------
# RoPE


def test_rope_inv_freq_is_theta_power():
    inv_freq = rope_inv_freq(8, 10000.0)
    np.testing.assert_allclose(inv_freq, [1.0, 10000.0 ** -0.25, 10000.0 ** -0.5, 10000.0 ** -0.75],
                               rtol=1e-15)


def test_rope_pairs_dimension_i_with_i_plus_half():
    # head_dim 4: dimension 0 pairs with 2 (frequency 1), dimension 1 with 3 (frequency 1/100).
    inv_freq = rope_inv_freq(4, 10000.0)
    x = np.array([[[1.0, 0.0, 0.0, 0.0]]])
    out = apply_rope(x, np.array([3]), inv_freq)[0, 0]
    np.testing.assert_allclose(out, [math.cos(3), 0, math.sin(3), 0], atol=1e-15)
    y = np.array([[[0.0, 0.0, 0.0, 1.0]]])
    out = apply_rope(y, np.array([3]), inv_freq)[0, 0]
    np.testing.assert_allclose(out, [0, -math.sin(0.03), 0, math.cos(0.03)], atol=1e-15)


def test_rope_is_identity_at_position_zero_and_preserves_norms():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 3, 16))
    inv_freq = rope_inv_freq(16, 10000.0)
    np.testing.assert_array_equal(apply_rope(x, np.zeros(5, dtype=int), inv_freq), x)
    rotated = apply_rope(x, np.array([1, 7, 100, 1000, 2047]), inv_freq)
    pair_norms = lambda t: np.hypot(t[..., :8], t[..., 8:])
    np.testing.assert_allclose(pair_norms(rotated), pair_norms(x), rtol=1e-13)


@pytest.mark.parametrize("scaling", [None, LLAMA3_SCALING], ids=["plain", "llama3"])
def test_rope_scores_depend_only_on_relative_position(scaling):
    rng = np.random.default_rng(1)
    q, k = rng.standard_normal((2, 1, 1, 32))
    inv_freq = rope_inv_freq(32, 10000.0, scaling)
    score = lambda m, n: float(np.sum(apply_rope(q, np.array([m]), inv_freq)
                                      * apply_rope(k, np.array([n]), inv_freq)))
    for m, n in [(5, 2), (17, 0), (300, 299)]:
        for shift in (1, 33, 1000):
            assert score(m + shift, n + shift) == pytest.approx(score(m, n), rel=1e-9, abs=1e-12)


def test_llama3_scaling_keeps_high_scales_low_and_blends_medium_frequencies():
    head_dim, theta = 48, 10000.0
    plain = rope_inv_freq(head_dim, theta)
    scaled = rope_inv_freq(head_dim, theta, LLAMA3_SCALING)
    wavelen = 2 * np.pi / plain
    high = wavelen < 256 / 4
    low = wavelen > 256 / 1
    medium = ~high & ~low
    assert high.any() and low.any() and medium.any(), "the test shape must hit all three bands"
    np.testing.assert_array_equal(scaled[high], plain[high])
    np.testing.assert_allclose(scaled[low], plain[low] / 8, rtol=1e-15)
    # Medium band: Meta's formula, smooth = (256 / wavelen - 1) / (4 - 1).
    smooth = (256 / wavelen[medium] - 1) / 3
    np.testing.assert_allclose(scaled[medium], (1 - smooth) * plain[medium] / 8
                               + smooth * plain[medium], rtol=1e-14)
    assert np.all(scaled[medium] < plain[medium]) and np.all(scaled[medium] > plain[medium] / 8)


def test_linear_rope_scaling_divides_frequencies():
    np.testing.assert_allclose(rope_inv_freq(16, 500.0, {"type": "linear", "factor": 4.0}),
                               rope_inv_freq(16, 500.0) / 4, rtol=1e-15)


# ---------------------------------------------------------------------------------------------------
# A brute-force forward pass: one token at a time, loops over heads, pairs and key positions.


def brute_force_inv_freq(cfg: LlamaConfig) -> list[float]:
    freqs = []
    for i in range(cfg.head_dim // 2):
        freq = 1.0 / cfg.rope_theta ** (2 * i / cfg.head_dim)
        s = cfg.rope_scaling
        if s is not None:  # Meta's apply_scaling, one frequency at a time.
            wavelen = 2 * math.pi / freq
            old_len = s["original_max_position_embeddings"]
            if wavelen < old_len / s["high_freq_factor"]:
                pass
            elif wavelen > old_len / s["low_freq_factor"]:
                freq = freq / s["factor"]
            else:
                smooth = ((old_len / wavelen - s["low_freq_factor"])
                          / (s["high_freq_factor"] - s["low_freq_factor"]))
                freq = (1 - smooth) * freq / s["factor"] + smooth * freq
        freqs.append(freq)
    return freqs


def brute_force_logits(cfg: LlamaConfig, w: dict[str, np.ndarray], ids: list[int]) -> np.ndarray:
    w = {k: v.astype(np.float64) for k, v in w.items()}
    d, half = cfg.head_dim, cfg.head_dim // 2
    freqs = brute_force_inv_freq(cfg)
    keys = [[] for _ in range(cfg.num_layers)]  # [layer][position] -> [num_kv_heads, d]
    values = [[] for _ in range(cfg.num_layers)]

    def norm(x, weight):
        return x / math.sqrt(float(np.dot(x, x)) / x.size + cfg.rms_norm_eps) * weight

    def rotate(vec, pos):
        out = vec.copy()
        for i in range(half):
            c, s = math.cos(pos * freqs[i]), math.sin(pos * freqs[i])
            out[i] = vec[i] * c - vec[i + half] * s
            out[i + half] = vec[i + half] * c + vec[i] * s
        return out

    rows = []
    for pos, tok in enumerate(ids):
        x = w["model.embed_tokens.weight"][tok].copy()
        for layer in range(cfg.num_layers):
            p = f"model.layers.{layer}.self_attn."
            n = norm(x, w[f"model.layers.{layer}.input_layernorm.weight"])
            q, k, v = (w[p + m + "_proj.weight"] @ n for m in "qkv")
            if cfg.attention_bias:
                q, k, v = (t + w[p + m + "_proj.bias"] for t, m in zip((q, k, v), "qkv"))
            keys[layer].append([rotate(k[h * d:(h + 1) * d], pos) for h in range(cfg.num_kv_heads)])
            values[layer].append([v[h * d:(h + 1) * d] for h in range(cfg.num_kv_heads)])
            attn = []
            for head in range(cfg.num_heads):
                kv_head = head // (cfg.num_heads // cfg.num_kv_heads)
                qh = rotate(q[head * d:(head + 1) * d], pos)
                scores = [float(np.dot(qh, keys[layer][j][kv_head])) / math.sqrt(d)
                          for j in range(pos + 1)]
                top = max(scores)
                weights = [math.exp(s - top) for s in scores]
                total = sum(weights)
                attn.append(sum(wj / total * values[layer][j][kv_head]
                                for j, wj in enumerate(weights)))
            x = x + w[p + "o_proj.weight"] @ np.concatenate(attn)
            m = norm(x, w[f"model.layers.{layer}.post_attention_layernorm.weight"])
            p = f"model.layers.{layer}.mlp."
            gate, up = w[p + "gate_proj.weight"] @ m, w[p + "up_proj.weight"] @ m
            x = x + w[p + "down_proj.weight"] @ (gate / (1 + np.exp(-gate)) * up)
        lm_head = w["model.embed_tokens.weight" if cfg.tie_word_embeddings else "lm_head.weight"]
        rows.append(lm_head @ norm(x, w["model.norm.weight"]))
    return np.array(rows)


@pytest.mark.parametrize("name", ["tiny", "qwen2-tiny", "tiny-llama3"])
def test_matches_brute_force_loop(name, model_dirs, references):
    ids = random_ids(9, seed=3)
    cfg = load_config(model_dirs[name])
    expected = brute_force_logits(cfg, load_weights(model_dirs[name]), ids)
    actual = references[name].logits(ids)
    for row in range(len(ids)):
        assert relative_error(actual[row], expected[row]) < 1e-12, f"{name} row {row}"


def test_llama3_scaling_changes_the_logits(model_dirs, references):
    # The scaled model differs from the plain tiny only by rope_scaling: it must matter.
    ids = random_ids(64, seed=4)
    assert relative_error(references["tiny-llama3"].logits(ids), references["tiny"].logits(ids)) > 1e-3


# ---------------------------------------------------------------------------------------------------
# Self-consistency: KV cache, causality, GQA


@pytest.mark.parametrize("name", ["tiny", "qwen2-tiny", "tiny-llama3"])
def test_incremental_and_chunked_match_full_recompute(name, references):
    model = references[name]
    ids = random_ids(40, seed=5)
    full = model.logits(ids)
    cache = model.new_cache()
    one_by_one = np.concatenate([model.forward([t], cache) for t in ids])
    assert cache.length == len(ids)
    cache = model.new_cache()
    chunked = np.concatenate([model.forward(ids[a:b], cache) for a, b in [(0, 13), (13, 14), (14, 40)]])
    for row in range(len(ids)):
        assert relative_error(one_by_one[row], full[row]) < 1e-12, f"row {row}"
        assert relative_error(chunked[row], full[row]) < 1e-12, f"row {row}"


def test_logits_are_causal(references):
    model = references["tiny"]
    ids = random_ids(30, seed=6)
    full = model.logits(ids)
    changed = ids[:20] + random_ids(10, seed=7)
    np.testing.assert_allclose(model.logits(changed)[:20], full[:20], rtol=1e-12, atol=1e-12)
    assert relative_error(model.logits(changed)[20], full[20]) > 1e-3


def test_greedy_rows_are_the_logits_that_chose_each_token(references):
    model = references["qwen2-tiny"]
    prompt = random_ids(11, seed=8)
    tokens, rows = model.greedy(prompt, 8)
    assert rows.shape == (8, model.config.vocab_size)
    assert tokens == [int(np.argmax(r)) for r in rows]
    full = model.logits(prompt + tokens[:-1])[len(prompt) - 1:]
    for row in range(8):
        assert relative_error(rows[row], full[row]) < 1e-12


def test_gqa_equals_multi_head_with_repeated_kv_heads(model_dirs, references):
    gqa = references["qwen2-tiny"]
    cfg = gqa.config
    assert cfg.num_kv_heads < cfg.num_heads
    group, d = cfg.num_heads // cfg.num_kv_heads, cfg.head_dim
    weights = load_weights(model_dirs["qwen2-tiny"])
    for name in list(weights):
        if any(f"{m}_proj." in name for m in "kv"):
            rows = weights[name].shape  # [num_kv_heads * d] + ([hidden] for a weight, [] for a bias)
            heads = weights[name].reshape(cfg.num_kv_heads, d, *rows[1:])
            weights[name] = np.repeat(heads, group, axis=0).reshape(cfg.num_heads * d, *rows[1:])
    mha_cfg = LlamaConfig(**{**cfg.__dict__, "num_kv_heads": cfg.num_heads})
    mha = ReferenceLlama(mha_cfg, weights)
    ids = random_ids(25, seed=9)
    assert relative_error(mha.logits(ids), gqa.logits(ids)) < 1e-12


def test_rejects_out_of_range_ids(references):
    with pytest.raises(ValueError):
        references["tiny"].logits([0, 32000])
    with pytest.raises(ValueError):
        references["tiny"].forward([], KvCache([], []))
