"""The embedded default model (models/kjv-4m, scripts/train_default_model.py): what a fresh clone's
first command prints reads as English, the chat endpoint answers in kind, and `baton eval` pins its
held-out perplexity in f32 and bounds what bf16 weights and a bf16 KV cache cost."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest

from serving_fixtures import DeploymentFactory

MODEL = Path(__file__).resolve().parents[2] / "models" / "kjv-4m"
# `baton eval --max-text-tokens 8192 --window 256 --chunk 64` in f32, measured when the model was trained
# (models/kjv-4m/README.md): a drift beyond 0.1% means the engine or the checkpoint changed (CPUs
# with other SIMD widths round differently, by far less).
PINNED_PERPLEXITY = 28.92
# bf16 matmuls and a bf16 KV cache (read back through chunked prefill) may cost at most this much.
BF16_RATIO_LIMIT = 1.01
EVAL_ARGS = ("--window", "256", "--chunk", "64", "--json")


def heldout_words() -> set[str]:
    return set(re.findall(r"[a-z]+", (MODEL / "heldout.txt").read_text().lower()))


def reads_as_english(text: str, vocabulary: set[str], min_words: int = 15) -> tuple[bool, str]:
    """Most words are words the model's corpus uses (the held-out chapters, which training never
    saw, stand in for a dictionary) and the text is mostly letters and spaces."""
    words = re.findall(r"[A-Za-z]+", text)
    known = [w for w in words if w.lower() in vocabulary]
    letters = sum(c.isalpha() or c.isspace() for c in text)
    ok = len(words) >= min_words and len(known) >= 0.9 * len(words) and letters >= 0.9 * len(text)
    return ok, f"{len(known)}/{len(words)} known words, {letters}/{len(text)} letters: {text!r}"


def eval_json(run_baton, *args, tokens: int = 8192) -> dict:
    return json.loads(
        run_baton("eval", *EVAL_ARGS, "--max-text-tokens", tokens, *args, timeout=300).stdout)


@pytest.mark.engine
def test_the_default_generation_reads_as_english(run_baton):
    """The README's first command, with the default model (no --model)."""
    text = run_baton("generate", "--prompt", "Once upon a time", "--max-tokens", "64",
                     "--temperature", "0.7", "--seed", "1").stdout
    ok, why = reads_as_english(text, heldout_words())
    assert ok, why


@pytest.mark.engine
def test_eval_pins_the_heldout_perplexity(run_baton):
    result = eval_json(run_baton)
    assert result["model"].endswith("kjv-4m") and result["num_scored_tokens"] == 8192
    assert result["perplexity"] == pytest.approx(PINNED_PERPLEXITY, rel=1e-3), result


@pytest.mark.engine
def test_bf16_weights_and_kv_stay_close_to_f32(run_baton):
    f32 = eval_json(run_baton)["perplexity"]
    bf16 = eval_json(run_baton, "--dtype", "bf16", "--kv-cache-dtype", "bf16")
    assert bf16["kv_cache_dtype"] == "bf16"
    assert 1 / BF16_RATIO_LIMIT <= bf16["perplexity"] / f32 <= BF16_RATIO_LIMIT, (f32, bf16)


@pytest.mark.engine
def test_the_cuda_emulated_device_scores_as_the_cpu(run_baton):
    cpu = eval_json(run_baton, tokens=1024)["perplexity"]
    emulated = eval_json(run_baton, "--device", "cuda-emulated", tokens=1024)
    assert emulated["perplexity"] == pytest.approx(cpu, rel=1e-4)


@pytest.mark.engine
def test_eval_refuses_bad_input_in_one_line(run_baton, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    for args, message in [(("--text", str(tmp_path / "missing.txt")), "cannot read"),
                          (("--text", str(empty)), "no tokens"),
                          (("--window", "1"), "--window"),
                          (("--dtype", "f8"), "--dtype")]:
        proc = run_baton("eval", *args, check=False)
        assert proc.returncode != 0 and message in proc.stderr, (args, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


@pytest.fixture(scope="module")
def served(baton_binary, tmp_path_factory):
    """The default model on one colocated worker with the OpenAI API."""
    factory = DeploymentFactory(baton_binary, MODEL, tmp_path_factory.mktemp("default-model"))
    yield factory.start("default-model", mode="colocated", http=True)
    problems = factory.stop_all()
    assert not problems, "\n".join(problems)


def post(deployment, path: str, body: dict) -> dict:
    request = urllib.request.Request(f"http://127.0.0.1:{deployment.http_port}{path}",
                                     data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


@pytest.mark.engine
def test_chat_answers_in_kind(served):
    answer = post(served, "/v1/chat/completions",
                  {"messages": [{"role": "user", "content": "What does Psalms 23:1 say?"}],
                   "max_tokens": 64, "temperature": 0.7, "seed": 1})
    choice = answer["choices"][0]
    # It answers with a verse and ends its turn (<|eot_id|>), as its chat samples did. (Sampled, as a
    # chat client would: greedy decoding of a model this small falls into loops.)
    assert choice["finish_reason"] == "stop", answer
    ok, why = reads_as_english(choice["message"]["content"], heldout_words(), min_words=5)
    assert ok, why


@pytest.mark.engine
def test_the_completions_api_scores_as_baton_eval(served, run_baton):
    """lm-evaluation-harness's way (echo, logprobs, max_tokens 0) over the served API gives the
    in-process `baton eval` figure for the same window."""
    from tokenizers import Tokenizer

    text = (MODEL / "heldout.txt").read_text()[:4000]
    ids = Tokenizer.from_file(str(MODEL / "tokenizer.json")).encode(text, add_special_tokens=False).ids
    window = [0] + ids[:256]  # <|begin_of_text|> and the text's first 256 tokens
    answer = post(served, "/v1/completions",
                  {"prompt": window, "echo": True, "logprobs": 0, "max_tokens": 0})
    scores = answer["choices"][0]["logprobs"]["token_logprobs"]
    served_nll = -sum(scores[1:]) / 256
    in_process = json.loads(run_baton("eval", "--window", "256", "--max-text-tokens", "256",
                                      "--json").stdout)
    assert in_process["num_scored_tokens"] == 256
    assert served_nll == pytest.approx(in_process["mean_nll"], rel=1e-4)


@pytest.mark.engine
def test_its_tokenizer_encodes_as_hugging_face(run_baton, tmp_path):
    """The held-out chapters and a rendered chat turn (specials as text) encode to the ids the
    `tokenizers` library gives."""
    from tokenizers import Tokenizer

    reference = Tokenizer.from_file(str(MODEL / "tokenizer.json"))
    chat = ("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nWhat does John 3:16 say?"
            "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")
    for name, text in [("heldout", (MODEL / "heldout.txt").read_text()[:100_000]), ("chat", chat)]:
        (tmp_path / name).write_text(text)
        out = run_baton("tokenize", "--tokenizer", MODEL / "tokenizer.json", "--no-special-tokens",
                        "--input", tmp_path / name).stdout
        assert json.loads(out)["ids"] == reference.encode(text, add_special_tokens=False).ids, name
