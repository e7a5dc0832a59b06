"""The command-line surfaces of tensor and pipeline parallelism, end to end with the `baton` binary:

  * `baton generate --tensor-parallel-size N --pipeline-parallel-size M` gives token for token the
    greedy output of the default one-rank layout (tiny: 6 layers, 6 query and 6 KV heads; qwen2-tiny:
    8 query heads over 2 KV heads, so tp 4 replicates each KV head on two ranks), and logs one stderr
    line with what each rank holds;
  * a size below 1, or a layout that does not fit the model, is one line on stderr and exit code 2,
    for `baton generate` and for `baton serve --model` (before any process starts);
  * a colocated `baton serve` deployment with tp 2 or pp 2 streams exactly the local greedy tokens;
  * a disaggregated `baton serve` streams exactly the local greedy tokens, with both phases on
    tp 2 (`--model ... --tensor-parallel-size 2`) and with the KV re-sliced between layouts
    (prefill -> decode: tp 2 -> tp 1, tp 1 -> tp 2, pp 2 -> tp 2, tp 2 x pp 2 -> pp 2, tp 2 -> pp 2).
"""

from __future__ import annotations

import random
import re
import subprocess
import time
from pathlib import Path

import pytest

from serving_fixtures import (STARTUP_TIMEOUT_S, STOP_GRACE_S, Deployment,
                              LineCollector, generate_args, parse_generate_json, pick_port_block)

MAX_TOKENS = 24
PROMPT = ("In a hole in the ground there lived a hobbit. Not a nasty, dirty, wet hole, filled with the "
          "ends of worms and an oozy smell, nor yet a dry, bare, sandy hole.")
RANKS_LINE = re.compile(r"^baton: (tp \d+ x pp \d+): (rank 0 .*)$", re.MULTILINE)


def existing_or_fresh(build_dir: Path, make_checkpoint_module, tmp_path_factory, shape: str) -> Path:
    """$BATON_BUILD_DIR/models/<shape> when complete, else a fresh one in a temporary directory."""
    mc = make_checkpoint_module
    existing = build_dir / "models" / shape
    if mc.is_complete(existing, mc.stamp(shape, "f32", 0, 1, None)):
        return existing
    out = tmp_path_factory.mktemp("models") / shape
    mc.write_checkpoint(out, shape)
    return out


@pytest.fixture(scope="module")
def tiny_model(build_dir, make_checkpoint_module, tmp_path_factory) -> Path:
    return existing_or_fresh(build_dir, make_checkpoint_module, tmp_path_factory, "tiny")


@pytest.fixture(scope="module")
def qwen2_tiny_model(build_dir, make_checkpoint_module, tmp_path_factory) -> Path:
    return existing_or_fresh(build_dir, make_checkpoint_module, tmp_path_factory, "qwen2-tiny")


def generate(run_baton, model: Path, *layout: str, prompt: str = PROMPT):
    """`baton generate --json` greedy with ignore_eos; returns (LocalRun, stderr)."""
    proc = run_baton("generate", "--model", model, "--json",
                     *generate_args(prompt=prompt, max_tokens=MAX_TOKENS, ignore_eos=True), *layout)
    return parse_generate_json(proc.stdout), proc.stderr


# --- baton generate ------------------------------------------------------------------------------


@pytest.mark.engine
@pytest.mark.parametrize("model_name,layout,expected_ranks", [
    ("tiny", ["--tensor-parallel-size", "2"],
     "tp 2 x pp 1: rank 0 layers 0-5, KV heads 0-2, {} MiB weights; rank 1 layers 0-5, KV heads 3-5"),
    ("tiny", ["--pipeline-parallel-size", "2"],
     "tp 1 x pp 2: rank 0 layers 0-2, KV heads 0-5, {} MiB weights; rank 1 layers 3-5, KV heads 0-5"),
    ("tiny", ["--pipeline-parallel-size", "3"],
     "tp 1 x pp 3: rank 0 layers 0-1, KV heads 0-5, {} MiB weights; rank 1 layers 2-3, KV heads 0-5"),
    ("tiny", ["--tensor-parallel-size", "2", "--pipeline-parallel-size", "2"],
     "tp 2 x pp 2: rank 0 layers 0-2, KV heads 0-2, {} MiB weights; rank 1 layers 0-2, KV heads 3-5"),
    ("tiny", ["--tensor-parallel-size", "3", "--pipeline-parallel-size", "2"],
     "tp 3 x pp 2: rank 0 layers 0-2, KV heads 0-1, {} MiB weights; rank 1 layers 0-2, KV heads 2-3"),
    ("qwen2-tiny", ["--tensor-parallel-size", "4"],
     "tp 4 x pp 1: rank 0 layers 0-3, KV heads 0, {} MiB weights; rank 1 layers 0-3, KV heads 0,"),
    ("qwen2-tiny", ["--tensor-parallel-size", "2", "--pipeline-parallel-size", "2"],
     "tp 2 x pp 2: rank 0 layers 0-1, KV heads 0, {} MiB weights; rank 1 layers 0-1, KV heads 1,"),
])
def test_generate_layout_matches_one_rank(run_baton, tiny_model, qwen2_tiny_model, model_name,
                                          layout, expected_ranks):
    model = tiny_model if model_name == "tiny" else qwen2_tiny_model
    one_rank, one_rank_err = generate(run_baton, model)
    ranked, ranked_err = generate(run_baton, model, *layout)
    assert ranked.prompt_ids == one_rank.prompt_ids
    assert len(ranked.token_ids) == MAX_TOKENS
    assert ranked.token_ids == one_rank.token_ids, f"{layout}: greedy tokens differ from one rank"
    assert ranked.text == one_rank.text
    assert not RANKS_LINE.search(one_rank_err), "one rank logs no layout"
    [line] = [m.group(0) for m in RANKS_LINE.finditer(ranked_err)]
    assert re.match("baton: " + re.escape(expected_ranks).replace(r"\{\}", r"[0-9.]+"), line), line


@pytest.mark.engine
@pytest.mark.parametrize("flags,message", [
    (["--tensor-parallel-size", "0"], "baton generate: --tensor-parallel-size: must be >= 1, got 0"),
    (["--pipeline-parallel-size", "-1"],
     "baton generate: --pipeline-parallel-size: must be >= 1, got -1"),
    (["--tensor-parallel-size", "4"],
     "baton generate: tp 4 x pp 1 does not fit the model: shard: tp_size 4 does not divide "
     "num_heads 6"),
    (["--pipeline-parallel-size", "7"],
     "baton generate: tp 1 x pp 7 does not fit the model: shard: 7 pipeline stages for 6 layers"),
    (["--tensor-parallel-size", "100000", "--pipeline-parallel-size", "100000"],
     "baton generate: tp 100000 x pp 100000 does not fit the model: shard: tp_size 100000"),
    (["--server", "127.0.0.1:1", "--tensor-parallel-size", "2"],
     "baton generate: --tensor-parallel-size/--pipeline-parallel-size lay out the model in this "
     "process; with --server the deployment's config decides"),
])
def test_generate_bad_layout_is_one_line_and_exit_2(run_baton, tiny_model, flags, message):
    proc = run_baton("generate", "--model", tiny_model, "--prompt", "Hi", "--max-tokens", "2", *flags,
                     check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith(message), proc.stderr


# --- baton serve --------------------------------------------------------------------------------


@pytest.mark.engine
@pytest.mark.parametrize("flags,message", [
    (["--tensor-parallel-size", "0"], "baton serve: --tensor-parallel-size: must be >= 1, got 0"),
    (["--tensor-parallel-size", "4"],
     "baton serve: prefill: tp 4 x pp 1 does not fit the model: shard: tp_size 4 does not divide "
     "num_heads 6"),
    (["--pipeline-parallel-size", "7"],
     "baton serve: prefill: tp 1 x pp 7 does not fit the model: shard: 7 pipeline stages for 6 "
     "layers"),
])
def test_serve_model_bad_layout_is_one_line_and_exit_2(run_baton, tiny_model, flags, message):
    proc = run_baton("serve", "--model", tiny_model, "--grpc-port", "1", *flags, check=False, timeout=30)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [proc.stderr.rstrip("\n")], proc.stderr
    assert proc.stderr.startswith(message), proc.stderr


@pytest.mark.engine
@pytest.mark.parametrize("layout", [{"tp": 2}, {"pp": 2}, {"tp": 2, "pp": 2}],
                         ids=["tp2", "pp2", "tp2xpp2"])
def test_colocated_layout_streams_the_local_greedy_tokens(fresh_deployments, run_baton, tiny_model, layout):
    expected, _ = generate(run_baton, tiny_model)
    deployment = fresh_deployments.start(f"colocated-{'-'.join(map(str, layout.values()))}",
                                   mode="colocated", colocated=layout)
    tp, pp = layout.get("tp", 1), layout.get("pp", 1)
    assert f"colocated 1 instance x (tp {tp} x pp {pp}, cpu)" in deployment.stdout.text()
    assert f"baton: colocated instance, tp {tp} x pp {pp}: rank 0 layers" in deployment.stderr.text()
    with deployment.client() as client, client.generate(prompt=PROMPT, max_tokens=MAX_TOKENS,
                                                        ignore_eos=True) as stream:
        chunks = list(stream)
    assert len(chunks) > 1, "streamed in several chunks"
    token_ids = tuple(t for c in chunks for t in c.token_ids)
    assert token_ids == expected.token_ids
    assert "".join(c.text for c in chunks) == expected.text


def start_serve_model(baton_binary: Path, model: Path, *flags: str) -> Deployment | None:
    """`baton serve --model MODEL FLAGS` (the default disaggregated deployment: scheduler on P,
    prefill on P+1, decode on P+2, the internal registry on P+3); None when it does not announce
    that it serves."""
    base = pick_port_block(4, random.Random(time.time_ns()))
    launcher = subprocess.Popen(
        [str(baton_binary), "serve", "--model", str(model), "--grpc-port", str(base), "--port", "0",
         "--stop-grace", str(STOP_GRACE_S), "--startup-timeout", str(int(STARTUP_TIMEOUT_S)), *flags],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)
    deployment = Deployment(name="serve-model", launcher=launcher, scheduler_port=base,
                            worker_ports={"prefill worker 0": base + 1, "decode worker 0": base + 2},
                            secret="",  # the launcher's own: this test calls no internal API
                            internal_port=base + 3,
                            stdout=LineCollector(launcher.stdout), stderr=LineCollector(launcher.stderr))
    if deployment.stdout.wait_for(r"^baton: serving ", STARTUP_TIMEOUT_S + 5,
                                  alive=lambda: launcher.poll() is None) is None:
        deployment.stop()
        return None
    for child in ["scheduler", *deployment.worker_ports]:
        if started := deployment.stderr.wait_for(rf"^baton: started {re.escape(child)} \(pid (\d+)\)$", 5):
            deployment.pids[child] = int(started.group(1))
    return deployment


@pytest.mark.engine
def test_disaggregated_tp2_streams_the_local_greedy_tokens(baton_binary, run_baton, tiny_model):
    expected, _ = generate(run_baton, tiny_model)
    deployment = start_serve_model(baton_binary, tiny_model, "--tensor-parallel-size", "2")
    assert deployment is not None, "baton serve --model --tensor-parallel-size 2 did not start"
    try:
        with deployment.client() as client:
            result = client.complete(prompt=PROMPT, max_tokens=MAX_TOKENS, ignore_eos=True)
        assert tuple(result.token_ids) == expected.token_ids
        assert result.text == expected.text
    finally:
        problems = deployment.stop()
    assert not problems, "\n".join(problems)


@pytest.mark.engine
@pytest.mark.parametrize("prefill,decode", [
    ({"tp": 2}, {}), ({}, {"tp": 2}), ({"pp": 2}, {"tp": 2}), ({"tp": 2, "pp": 2}, {"pp": 2}),
    ({"tp": 2}, {"pp": 2}),
], ids=["tp2-to-tp1", "tp1-to-tp2", "pp2-to-tp2", "tp2xpp2-to-pp2", "tp2-to-pp2"])
def test_disaggregated_across_layouts_streams_the_local_greedy_tokens(fresh_deployments, run_baton,
                                                                      tiny_model, prefill, decode):
    expected, _ = generate(run_baton, tiny_model)
    deployment = fresh_deployments.start("across-layouts", prefill=prefill, decode=decode)
    with deployment.client() as client, client.generate(prompt=PROMPT, max_tokens=MAX_TOKENS,
                                                        ignore_eos=True) as stream:
        chunks = list(stream)
    token_ids = tuple(t for c in chunks for t in c.token_ids)
    assert token_ids == expected.token_ids
    assert "".join(c.text for c in chunks) == expected.text
