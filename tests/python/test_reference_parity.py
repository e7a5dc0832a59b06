"""The engine (`baton generate`, float32) against the float64 NumPy reference (reference_llama.py):
  (a) logits: every dumped row within ||engine - ref|| / ||ref|| < 1e-4 of the reference fed the same
      tokens, on tiny, small and qwen2-tiny, prompts of 1, 17 and 300 random tokens;
  (b) greedy decoding: 64 tokens identical to the reference's. Where the reference's top two logits are
      closer than 1e-5 of its logit range, float32 rounding may legitimately pick the other one: that
      is reported as a tie, and the engine is restarted on the prompt plus the reference's tokens so
      far (teacher forcing) — the check itself is never loosened.
Both use one reference pass over prompt + engine tokens: given the same prefix, the reference's greedy
choice at each step is the argmax of its row, so the two greedy sequences agree iff every argmax does.
Batch invariance is tested in C++. These tests need the `baton` binary: without it they fail.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from reference_llama import ReferenceLlama

pytestmark = pytest.mark.engine

MODELS = ["tiny", "small", "qwen2-tiny"]
PROMPT_LENS = [1, 17, 300]
NUM_GREEDY_TOKENS = 64
MAX_RELATIVE_ERROR = 1e-4
TIE_FRACTION_OF_RANGE = 1e-5
ENGINE_THREADS = 2


@dataclass
class EngineRun:
    prompt_ids: list[int]
    tokens: list[int]  # [max_tokens] generated ids
    texts: list[str]  # [max_tokens] the "text" of each token line
    logits: np.ndarray  # [max_tokens, vocab] float32, row i chose tokens[i]
    summary: dict  # the last JSON line


def random_prompt(length: int, vocab_size: int) -> list[int]:
    # Ids 0 and 1 are BOS/EOS; the rest are ordinary tokens.
    return [int(t) for t in np.random.default_rng(1000 + length).integers(2, vocab_size, length)]


@pytest.fixture(scope="module")
def generate(run_baton, tmp_path_factory):
    """generate(model_dir, max_tokens, prompt_ids=... | prompt=...) -> EngineRun (greedy)."""
    out_dir = tmp_path_factory.mktemp("engine")
    counter = iter(range(1 << 30))

    def run(model_dir: Path, max_tokens: int, prompt_ids: list[int] | None = None,
            prompt: str | None = None) -> EngineRun:
        dump = out_dir / f"logits{next(counter)}.f32"
        prompt_args = (["--prompt-ids", ",".join(map(str, prompt_ids))] if prompt_ids is not None
                       else ["--prompt", prompt])
        proc = run_baton("generate", "--model", model_dir, *prompt_args, "--max-tokens", max_tokens,
                         "--temperature", 0, "--ignore-eos", "--json", "--dump-logits", dump,
                         "--threads", ENGINE_THREADS, timeout=600)
        lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
        token_lines, summary = lines[:-1], lines[-1]
        assert all("token_id" in line for line in token_lines), proc.stdout[-2000:]
        assert summary["finish_reason"] == "length", summary
        if prompt_ids is not None:
            assert summary["prompt_token_ids"] == prompt_ids
        tokens = [line["token_id"] for line in token_lines]
        assert len(tokens) == max_tokens
        logits = np.fromfile(dump, dtype="<f4")
        assert logits.size % max_tokens == 0, f"{dump}: {logits.size} floats for {max_tokens} rows"
        return EngineRun(summary["prompt_token_ids"], tokens, [line["text"] for line in token_lines],
                         logits.reshape(max_tokens, -1), summary)

    return run


@pytest.fixture(scope="module")
def reference():
    """reference(model_dir) -> ReferenceLlama, loaded once per directory."""
    loaded: dict[Path, ReferenceLlama] = {}

    def get(model_dir: Path) -> ReferenceLlama:
        if model_dir not in loaded:
            loaded[model_dir] = ReferenceLlama.from_dir(model_dir)
        return loaded[model_dir]

    return get


@pytest.fixture(scope="module")
def greedy_case(models_dir, generate, reference):
    """greedy_case(model, prompt_len) -> (model_dir, prompt, EngineRun of 64 tokens, reference rows),
    memoised so that the logits test and the greedy test share one engine run and one reference pass.
    The reference rows [64, vocab] are the reference's logits fed the engine's tokens."""
    cases = {}

    def get(model: str, prompt_len: int):
        if (model, prompt_len) not in cases:
            model_dir = models_dir / model
            ref = reference(model_dir)
            prompt = random_prompt(prompt_len, ref.config.vocab_size)
            run = generate(model_dir, NUM_GREEDY_TOKENS, prompt_ids=prompt)
            cases[model, prompt_len] = (model_dir, prompt, run, teacher_forced_rows(ref, run))
        return cases[model, prompt_len]

    return get


def teacher_forced_rows(ref: ReferenceLlama, run: EngineRun) -> np.ndarray:
    """[len(run.tokens), vocab]: the reference's logits at the last prompt position and after each of
    the engine's tokens but the last, in one forward pass."""
    return ref.forward(run.prompt_ids + run.tokens[:-1])[len(run.prompt_ids) - 1:]


def assert_logits_match(ref_rows: np.ndarray, run: EngineRun, label: str) -> None:
    """Every engine row against the reference fed the same tokens."""
    assert run.logits.shape == ref_rows.shape, label
    assert np.isfinite(run.logits).all(), label
    errors = np.linalg.norm(run.logits - ref_rows, axis=1) / np.linalg.norm(ref_rows, axis=1)
    worst = int(np.argmax(errors))
    print(f"{label}: max relative logits error {errors[worst]:.2e} (row {worst})")
    assert errors[worst] < MAX_RELATIVE_ERROR, (
        f"{label}: row {worst} has relative error {errors[worst]:.3e}; "
        f"max abs diff {np.abs(run.logits[worst] - ref_rows[worst]).max():.3e}")


def is_tie(row: np.ndarray) -> tuple[bool, float]:
    top_two = np.sort(row)[-2:]
    gap = float(top_two[1] - top_two[0])
    return gap < TIE_FRACTION_OF_RANGE * float(row.max() - row.min()), gap


def assert_greedy_matches(ref: ReferenceLlama, model_dir: Path, run: EngineRun, ref_rows: np.ndarray,
                          generate, label: str) -> None:
    """The engine's greedy tokens equal the reference's. Fed the same prefix, the reference's choice
    is argmax(ref_rows[i]), so the sequences agree iff every row's argmax is the engine's token. At a
    tie the engine restarts on the prompt plus the reference's choices (teacher forcing)."""
    prompt, num_tokens = run.prompt_ids, len(run.tokens)
    tokens, rows, checked = list(run.tokens), ref_rows, 0
    while True:
        choices = np.argmax(rows, axis=1)
        mismatch = next((i for i in range(checked, num_tokens) if choices[i] != tokens[i]), None)
        if mismatch is None:
            return
        tie, gap = is_tie(rows[mismatch])
        where = (f"{label}: generated token {mismatch}: engine {tokens[mismatch]}, reference "
                 f"{choices[mismatch]} (reference top-two gap {gap:.3e})")
        assert tie, f"{where} is not a tie"
        print(f"TIE {where}: teacher-forcing past it")
        warnings.warn(f"TIE {where}")
        forced = tokens[:mismatch] + [int(choices[mismatch])]
        checked = len(forced)
        if checked == num_tokens:
            return
        rerun = generate(model_dir, num_tokens - checked, prompt_ids=prompt + forced)
        tokens = forced + rerun.tokens
        rows = ref.forward(prompt + tokens[:-1])[len(prompt) - 1:]


@pytest.mark.parametrize("prompt_len", PROMPT_LENS)
@pytest.mark.parametrize("model", MODELS)
def test_logits_parity(model, prompt_len, greedy_case):
    _, _, run, ref_rows = greedy_case(model, prompt_len)
    assert_logits_match(ref_rows, run, f"{model}, {prompt_len}-token prompt")


@pytest.mark.parametrize("prompt_len", PROMPT_LENS)
@pytest.mark.parametrize("model", MODELS)
def test_greedy_parity(model, prompt_len, greedy_case, reference, generate):
    model_dir, _, run, ref_rows = greedy_case(model, prompt_len)
    assert_greedy_matches(reference(model_dir), model_dir, run, ref_rows, generate,
                          f"{model}, {prompt_len}-token prompt")


def test_llama3_rope_scaling_on_a_sharded_checkpoint(checkpoint_variant, generate, reference):
    # Positions up to ~330 turn the scaled low-frequency pairs visibly; three safetensors shards.
    model_dir = checkpoint_variant("tiny-llama3-3shards", "tiny", shards=3, rope_scaling="llama3")
    ref = reference(model_dir)
    run = generate(model_dir, 32, prompt_ids=random_prompt(300, ref.config.vocab_size))
    ref_rows = teacher_forced_rows(ref, run)
    assert_logits_match(ref_rows, run, "tiny-llama3-3shards")
    assert_greedy_matches(ref, model_dir, run, ref_rows, generate, "tiny-llama3-3shards")


def test_text_prompt(models_dir, generate, reference):
    model_dir = models_dir / "tiny"
    text = "The GNU General Public License is a free, copyleft license for software."
    run = generate(model_dir, 16, prompt=text)
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    assert run.prompt_ids == tokenizer.encode(text).ids
    assert "".join(run.texts) == tokenizer.decode(run.tokens)
    ref = reference(model_dir)
    ref_rows = teacher_forced_rows(ref, run)
    assert_logits_match(ref_rows, run, "tiny, text prompt")
    assert_greedy_matches(ref, model_dir, run, ref_rows, generate, "tiny, text prompt")
