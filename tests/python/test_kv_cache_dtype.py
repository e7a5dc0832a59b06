"""A bf16 KV cache (`kv_cache_dtype: bf16`, `--kv-cache-dtype bf16`): the same greedy tokens from the
in-process engine and from a disaggregated deployment, whose prefill worker hands the bf16 blocks
to the decode worker over shared memory (CPU workers) or the emulated NCCL link (cuda-emulated
workers); the first token's logits equal the f32 cache's (a prompt attends to its own fresh K/V
rows), the next ones stay within 2% of each row's largest (K/V rounded to bf16: 2^-9 relative).
Engine-level and kernel-level checks are in tests/runtime/engine/engine_test.cc and
tests/kernels/."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from serving_fixtures import generate_args, parse_generate_json

PROMPT = "In a hole in the ground there lived a hobbit."
MAX_TOKENS = 6


def generate(run_baton, model: Path, tmp_path: Path, kv_dtype: str, device: str = "cpu",
             dtype: str = "f32"):
    logits_path = tmp_path / f"logits-{kv_dtype}-{device}-{dtype}.f32"
    proc = run_baton("generate", "--model", model, "--json", "--device", device, "--dtype", dtype,
                     "--kv-cache-dtype", kv_dtype, "--dump-logits", logits_path,
                     *generate_args(prompt=PROMPT, max_tokens=MAX_TOKENS, ignore_eos=True),
                     timeout=300)
    result = parse_generate_json(proc.stdout)
    logits = np.fromfile(logits_path, dtype=np.float32).reshape(len(result.token_ids), -1)
    return result, logits


@pytest.mark.engine
def test_generate_with_a_bf16_cache_stays_close_to_f32(run_baton, models_dir, tmp_path):
    model = models_dir / "tiny"
    f32, f32_logits = generate(run_baton, model, tmp_path, "f32")
    bf16, bf16_logits = generate(run_baton, model, tmp_path, "bf16")
    assert np.array_equal(bf16_logits[0], f32_logits[0])
    assert bf16.token_ids[:2] == f32.token_ids[:2]
    scale = np.abs(f32_logits[1]).max()
    diff = np.abs(bf16_logits[1] - f32_logits[1]).max()
    assert 0 < diff <= 2e-2 * scale, (diff, scale)


@pytest.mark.engine
@pytest.mark.parametrize("dtype,same_as", [("bf16", "bf16"), ("f32", "f32")])
def test_auto_kv_cache_dtype_follows_the_weights(run_baton, models_dir, tmp_path, dtype, same_as):
    model = models_dir / "tiny"
    auto, auto_logits = generate(run_baton, model, tmp_path, "auto", dtype=dtype)
    explicit, explicit_logits = generate(run_baton, model, tmp_path, same_as, dtype=dtype)
    assert auto.token_ids == explicit.token_ids
    assert np.array_equal(auto_logits, explicit_logits)


@pytest.mark.engine
def test_generate_with_an_unknown_kv_cache_dtype_is_one_line_and_exit_2(run_baton, models_dir):
    proc = run_baton("generate", "--model", models_dir / "tiny", "--prompt", "Hi",
                     "--kv-cache-dtype", "f16", check=False)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == ["baton generate: --kv-cache-dtype: 'f16' (f32, bf16 or auto)"]


@pytest.mark.engine
@pytest.mark.parametrize("device", ["cpu", "cuda-emulated"])
def test_disaggregated_serve_hands_off_a_bf16_cache(fresh_deployments, run_baton, tiny_model,
                                                    tmp_path, device):
    local, _ = generate(run_baton, tiny_model, tmp_path, "bf16", device)
    deployment = fresh_deployments.start(f"kv-bf16-{device}", config={"kv_cache_dtype": "bf16"},
                                   prefill={"devices": device}, decode={"devices": device})
    for _ in range(2):  # the second request reuses the mapping or the warm link
        with deployment.client() as client, client.generate(prompt=PROMPT, max_tokens=MAX_TOKENS,
                                                            ignore_eos=True) as stream:
            token_ids = tuple(t for chunk in stream for t in chunk.token_ids)
        assert token_ids == local.token_ids
