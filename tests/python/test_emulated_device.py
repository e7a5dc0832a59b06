"""`baton generate --device cuda-emulated`: the GPU backend's own code (weights uploaded to device
memory, the KV pool in device memory, every op launched on device pointers and checked for where
they point) run on the CPU through the SIMT emulation gives the CPU backend's greedy tokens and
logits on the generated `tiny` checkpoint: within 1e-4 of each row's largest logit with f32 weights,
and also with tp 2; and a `baton serve` whose workers run on `devices: cuda-emulated` — colocated, or
prefill and decode with the KV moved by the emulated NCCL link — streams the CPU backend's greedy
tokens. With bf16 weights the activations are rounded to bf16 before each product on
both devices; the attention kernels' last-bit differences can move an activation across a rounding
boundary, one bf16 step (2^-8 relative), so the logits agree within 1e-2 (measured: 4e-3) and the
greedy tokens are the same. With f16 weights (IEEE half, as a GPU f16 GEMM: activations rounded to
f16, f32 accumulation) one step is 2^-10 relative, a quarter of bf16's: within 2.5e-3 (measured:
9e-4)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from serving_fixtures import DeploymentFactory, generate_args, parse_generate_json

PROMPT = "In a hole in the ground there lived a hobbit."
MAX_TOKENS = 6


def run(run_baton, model: Path, tmp_path: Path, device: str, *flags: str):
    logits_path = tmp_path / f"logits-{device}-{'-'.join(flags) or 'default'}.f32"
    proc = run_baton("generate", "--model", model, "--json", "--device", device,
                     "--dump-logits", logits_path,
                     *generate_args(prompt=PROMPT, max_tokens=MAX_TOKENS, ignore_eos=True), *flags,
                     timeout=300)
    result = parse_generate_json(proc.stdout)
    logits = np.fromfile(logits_path, dtype=np.float32).reshape(len(result.token_ids), -1)
    return result, logits


@pytest.mark.engine
@pytest.mark.parametrize("flags,tolerance", [
    ((), 1e-4),
    (("--dtype", "bf16"), 1e-2),
    (("--dtype", "f16"), 2.5e-3),
    (("--tensor-parallel-size", "2"), 1e-4),
], ids=["f32", "bf16", "f16", "f32-tp2"])
def test_cuda_emulated_matches_the_cpu_backend(run_baton, models_dir, tmp_path, flags, tolerance):
    model = models_dir / "tiny"
    cpu, cpu_logits = run(run_baton, model, tmp_path, "cpu", *flags)
    emulated, emulated_logits = run(run_baton, model, tmp_path, "cuda-emulated", *flags)
    scale = np.abs(cpu_logits).max(axis=1, keepdims=True)
    # A step whose two best logits lie within the tolerance is a tie either device may break
    # either way (the tiny model's tokenizer, and so the prompt's tokens, depend on the machine's
    # Debian packages: make_checkpoint.py). The steps up to it must agree token for token, and its
    # own logits within the tolerance; past it the two contexts differ.
    top2 = np.sort(cpu_logits, axis=1)[:, -2:]
    ties = np.flatnonzero(top2[:, 1] - top2[:, 0] <= 2 * tolerance * scale[:, 0])
    agreed = int(ties[0]) if len(ties) else len(cpu.token_ids)
    assert emulated.token_ids[:agreed] == cpu.token_ids[:agreed]
    compared = min(agreed + 1, len(cpu.token_ids))
    assert np.all(np.abs(emulated_logits[:compared] - cpu_logits[:compared])
                  <= tolerance * scale[:compared])
    if agreed == len(cpu.token_ids):
        assert emulated.text == cpu.text


@pytest.mark.engine
def test_unknown_device_is_one_line_and_exit_2(run_baton, models_dir):
    proc = run_baton("generate", "--model", models_dir / "tiny", "--prompt", "Hi", "--device", "tpu",
                     check=False)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        'baton generate: --device: device "tpu": expected cpu, cuda, cuda:N or cuda-emulated']


@pytest.fixture
def deployments(baton_binary, models_dir, tmp_path):
    factory = DeploymentFactory(baton_binary, models_dir / "tiny", tmp_path)
    yield factory
    problems = factory.stop_all()
    assert not problems, "\n".join(problems)


@pytest.mark.engine
def test_colocated_serve_on_cuda_emulated_streams_the_cpu_tokens(deployments, run_baton, models_dir,
                                                                 tmp_path):
    cpu, _ = run(run_baton, models_dir / "tiny", tmp_path, "cpu")
    deployment = deployments.start("emulated", mode="colocated",
                                   colocated={"devices": "cuda-emulated"})
    assert "colocated 1 instance x (tp 1 x pp 1, cuda-emulated)" in deployment.stdout.text()
    with deployment.client() as client, client.generate(prompt=PROMPT, max_tokens=MAX_TOKENS,
                                                        ignore_eos=True) as stream:
        token_ids = tuple(t for chunk in stream for t in chunk.token_ids)
    assert token_ids == cpu.token_ids


@pytest.mark.engine
@pytest.mark.parametrize("prefill_tp", [1, 2], ids=["same-layout", "prefill-tp2-to-decode-tp1"])
def test_disaggregated_serve_on_cuda_emulated_streams_the_cpu_tokens(deployments, run_baton,
                                                                     models_dir, tmp_path,
                                                                     prefill_tp):
    """Prefill and decode workers both on the emulated GPU: their KV pools are in (emulated) device
    memory, so the KV moves over the emulated NCCL link (the prefill rank's KV server makes the id,
    the decode rank joins, then grouped send/recv of the coalesced ranges), re-sliced when the
    layouts differ."""
    cpu, _ = run(run_baton, models_dir / "tiny", tmp_path, "cpu")
    deployment = deployments.start(f"emulated-disagg-tp{prefill_tp}",
                                   prefill={"devices": "cuda-emulated", "tp": prefill_tp},
                                   decode={"devices": "cuda-emulated"})
    text = deployment.stdout.text()
    assert f"prefill 1 instance x (tp {prefill_tp} x pp 1, cuda-emulated)" in text
    assert "decode 1 instance x (tp 1 x pp 1, cuda-emulated)" in text
    for _ in range(2):  # the second request reuses the warm links
        with deployment.client() as client, client.generate(prompt=PROMPT, max_tokens=MAX_TOKENS,
                                                            ignore_eos=True) as stream:
            token_ids = tuple(t for chunk in stream for t in chunk.token_ids)
        assert token_ids == cpu.token_ids


@pytest.mark.engine
def test_prefill_and_decode_on_different_kinds_of_device_are_refused_in_one_line(run_baton,
                                                                                  models_dir,
                                                                                  tmp_path):
    config = tmp_path / "mixed.yaml"
    config.write_text(f"model: {models_dir / 'tiny'}\nprefill: {{devices: cuda-emulated}}\n")
    proc = run_baton("serve", "--config", config, check=False, timeout=30)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "prefill runs on cuda-emulated and decode on cpu" in proc.stderr
