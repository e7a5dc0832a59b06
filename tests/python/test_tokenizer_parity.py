"""Parity of `baton tokenize` with the Hugging Face `tokenizers` library.

Each tokenizer is trained here, with `tokenizers` itself, on text that ships with Debian
(/usr/share/common-licenses, /usr/share/doc/*/copyright and changelogs), in the layouts of GPT-2,
Llama-3, Qwen2, Llama-2 (SentencePiece BPE with byte fallback) and Mistral (Metaspace). For every
text of a varied corpus the ids of `baton tokenize` must equal `tokenizers`' encode(...).ids, its
decode must equal `tokenizers`' decode, and its incremental detokenizer must give the same text
piece by piece as `tokenizers`' DecodeStream.

Run: .venv/bin/python -m pytest tests/python/test_tokenizer_parity.py
The binary is $BATON_BUILD_DIR/bin/baton (default: <repo>/build/bin/baton).
"""

import glob
import gzip
import json
import os
import pathlib
import random
import subprocess

import pytest

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import (  # noqa: E402
    AddedToken,
    Regex,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
    trainers,
)

REPO = pathlib.Path(__file__).resolve().parents[2]
BATON = pathlib.Path(os.environ.get("BATON_BUILD_DIR", REPO / "build")) / "bin" / "baton"

LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN2_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
SPIECE = "\u2581"
BYTE_TOKENS = [f"<0x{b:02X}>" for b in range(256)]

pytestmark = pytest.mark.skipif(not BATON.exists(), reason=f"{BATON} is not built")


# ---------------------------------------------------------------------------------------------
# Text
# ---------------------------------------------------------------------------------------------


def _read_utf8(path, opener=open):
    try:
        with opener(path, "rb") as f:
            return f.read().decode("utf-8")
    except (OSError, UnicodeDecodeError, EOFError):
        return None


def _machine_text(budget_bytes):
    """Real text found on every Debian machine, deterministic for a given machine."""
    texts, total = [], 0
    sources = sorted(glob.glob("/usr/share/common-licenses/*"))
    sources += sorted(glob.glob("/usr/share/doc/*/copyright"))
    for path in sources:
        if total >= budget_bytes * 3 // 4:
            break
        text = _read_utf8(path) if os.path.isfile(path) else None
        if text:
            texts.append(text)
            total += len(text)
    for path in sorted(glob.glob("/usr/share/doc/*/changelog*.gz")):
        if total >= budget_bytes:
            break
        text = _read_utf8(path, gzip.open)
        if text:
            texts.append(text)
            total += len(text)
    return texts


HAND_WRITTEN = [
    "Hello world",
    "Hello, world! How's it going? I'M fine, you'RE great, they'LL see, we'VE won, it'D be.",
    "  leading spaces and trailing spaces   ",
    "tabs\tand\t\ttabs\t",
    "new\nlines\n\n\nand\r\nwindows\rlines\n",
    "   \n\t \n  ",
    " ",
    "\n",
    "digits 1 12 123 1234 12345 123456789012345678901234567890",
    "3.14159 2,718 1e-10 0x1F 007 ٣٤٥ १२३",
    "Café naïve résumé façade Ærøskøbing Straße Ångström",
    "Ελληνικά κείμενα και ΣΊΣΥΦΟΣ",
    "Русский текст, ёжик в тумане.",
    "中文文本，包含标点符号。日本語のテキスト、カタカナ。한국어 텍스트입니다.",
    "汉字混合English和123数字",
    "emoji 😀😃😄 👍🏽 🇫🇷🇯🇵 👨‍👩‍👧‍👦 🏳️‍🌈 🧑🏿‍🚀 ❤️ ✈︎",
    "زبان فارسی و العربية",
    "हिन्दी पाठ और தமிழ் உரை",
    "ภาษาไทยไม่มีช่องว่าง",
    "combining: e\u0301 a\u0308 n\u0303 — and NFC: é ä ñ",
    "ﬁ ligature, ① circled, Ｆｕｌｌｗｉｄｔｈ, ½ fraction",
    "nbsp:\u00a0here, ideographic:\u3000space, nel:\u0085end, thin:\u2009space",
    "zero\u200bwidth\u200cjoiners\u200d",
    "math ∑∫√∞≠≤≥ arrows →⇒↔ box ┌─┐",
    "code: for (int i = 0; i < n; ++i) { x[i] += y[i] * 2; }  // comment",
    "def f(x):\n    return x ** 2  # python\n",
    "URLs https://example.com/a?b=c&d=e#f and emails someone@example.org",
    "<s> literal angle tokens </s> and <0x41> and <unk>",
    "<s>hello</s>world<s>\n<unk>x</s> y",
    "<|endoftext|>special<|endoftext|> in the middle",
    "<|begin_of_text|>Hi<|eot_id|><|im_start|>user\nhello<|im_end|>",
    "GNU GNUs GNU's  GNU\tthe GNU General Public License",
    "the  <mask>  GNU License   <mask>x GNUx xGNU License\tfoo<mask><mask>  <mask>",
    "repeated aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa letters",
    "!!!???...,,,;;;:::---___===+++***&&&%%%$$$###@@@",
    "'s 's 'S 'll 'LL 'Ll",
    "mixed\t 😀 \n 中文 123abc\u00a0é\r\n",
    "",
]


def _random_texts(rng, count):
    pools = [
        "abcdefghijklmnopqrstuvwxyz",
        "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
        "0123456789",
        " \t\n\r  ",
        ".,;:!?'\"()[]{}<>-_/\\|@#$%^&*+=~`",
        "éèêëàâäôöûüçñßøåæœ",
        "中文字符测试数据日本語한국어",
        "😀😃👍🏽🇫🇷👨‍👩‍👧❤️",
        "\u0301\u0308\u200d\u00a0\u3000\u0085\ufeff",
    ]
    texts = []
    for _ in range(count):
        length = rng.randint(1, 60)
        texts.append("".join(rng.choice(rng.choice(pools)) for _ in range(length)))
    return texts


@pytest.fixture(scope="module")
def machine_text():
    return _machine_text(2_500_000)


@pytest.fixture(scope="module")
def corpus(machine_text):
    rng = random.Random(20240601)
    lines = [line for text in machine_text for line in text.splitlines() if line.strip()]
    sampled = rng.sample(lines, 250)
    paragraphs = ["\n".join(rng.sample(lines, 8)) + "\n\n" for _ in range(20)]
    texts = HAND_WRITTEN + sampled + paragraphs + _random_texts(rng, 200)
    return texts


# ---------------------------------------------------------------------------------------------
# Tokenizers, trained here
# ---------------------------------------------------------------------------------------------


def _train(tokenizer, machine_text, vocab_size, special_tokens, **trainer_args):
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=special_tokens, show_progress=False, **trainer_args
    )
    tokenizer.train_from_iterator(machine_text, trainer=trainer)
    return tokenizer


def _save(tokenizer_json, directory, name):
    path = directory / name / "tokenizer.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(tokenizer_json, ensure_ascii=False), encoding="utf-8")
    # Reload so that the reference is exactly the file baton reads.
    return path, Tokenizer.from_file(str(path))


def build_gpt2(machine_text, directory):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    _train(tok, machine_text, 2000, ["<|endoftext|>"],
           initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.add_special_tokens([AddedToken("<mask>", special=True, lstrip=True)])
    tok.add_tokens([AddedToken("GNU", single_word=True), AddedToken(" License", rstrip=True)])
    data = json.loads(tok.to_str())
    # The older merges format: "a b" strings (byte-level tokens never contain a space).
    data["model"]["merges"] = [" ".join(pair) for pair in data["model"]["merges"]]
    return _save(data, directory, "gpt2")


def build_llama3(machine_text, directory):
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>",
                "<|reserved_special_token_0|>"]
    _train(tok, machine_text, 3000, specials,
           initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(
            single="<|begin_of_text|> $A",
            pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
            special_tokens=[("<|begin_of_text|>", bos)],
        ),
    ])
    data = json.loads(tok.to_str())
    assert data["model"]["ignore_merges"] is True
    return _save(data, directory, "llama3")


def build_qwen2(machine_text, directory):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    _train(tok, machine_text, 2500, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
           initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    return _save(json.loads(tok.to_str()), directory, "qwen2")


def _sentencepiece_model(machine_text):
    """Vocab and merges of a SentencePiece-style BPE: <unk> <s> </s>, <0x00>..<0xFF>, pieces."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPIECE, prepend_scheme="always")
    _train(tok, machine_text, 1800, ["<unk>", "<s>", "</s>"], limit_alphabet=120)
    trained = json.loads(tok.to_str())["model"]
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for name in BYTE_TOKENS:
        vocab[name] = len(vocab)
    for piece, _ in sorted(trained["vocab"].items(), key=lambda item: item[1]):
        if piece not in vocab:
            vocab[piece] = len(vocab)
    merges = [list(pair) if isinstance(pair, list) else pair.split(" ") for pair in trained["merges"]]
    added = [
        {"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
        for i, c in enumerate(["<unk>", "<s>", "</s>"])
    ]
    model = {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
             "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True,
             "ignore_merges": False, "vocab": vocab, "merges": merges}
    template = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                   {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                 {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "<s>", "type_id": 1}},
                 {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}},
    }
    # A regular added token matched in normalized text (its content normalized to "▁License").
    added.append({"id": len(vocab), "content": "License", "single_word": False, "lstrip": False,
                  "rstrip": False, "normalized": True, "special": False})
    return added, model, template


def build_llama2(machine_text, directory):
    added, model, template = _sentencepiece_model(machine_text)
    data = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": SPIECE},
            {"type": "Replace", "pattern": {"String": " "}, "content": SPIECE}]},
        "pre_tokenizer": None,
        "post_processor": template,
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": SPIECE}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": model,
    }
    return _save(data, directory, "llama2")


def build_mistral(machine_text, directory):
    added, model, template = _sentencepiece_model(machine_text)
    data = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Metaspace", "replacement": SPIECE, "prepend_scheme": "first",
                          "split": False},
        "post_processor": template,
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "ByteFallback"},
            {"type": "Metaspace", "replacement": SPIECE, "prepend_scheme": "first", "split": False}]},
        "model": model,
    }
    return _save(data, directory, "mistral")


BUILDERS = {
    "gpt2": build_gpt2,
    "llama3": build_llama3,
    "qwen2": build_qwen2,
    "llama2": build_llama2,
    "mistral": build_mistral,
}
BYTE_LEVEL = {"gpt2", "llama3", "qwen2"}


@pytest.fixture(scope="module")
def trained(machine_text, tmp_path_factory):
    directory = tmp_path_factory.mktemp("tokenizers")
    return {name: build(machine_text, directory) for name, build in BUILDERS.items()}


# ---------------------------------------------------------------------------------------------
# Running baton
# ---------------------------------------------------------------------------------------------


def run_baton(args, input_lines=None, tmp_path=None):
    """Runs `baton tokenize` with --jsonl on the given JSON values; returns the parsed outputs."""
    input_path = tmp_path / "input.jsonl"
    with open(input_path, "w", encoding="utf-8") as f:
        for value in input_lines:
            f.write(json.dumps(value, ensure_ascii=False) + "\n")
    result = subprocess.run(
        [str(BATON), "tokenize", *args, "--jsonl", "--input", str(input_path)],
        capture_output=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    # split("\n"), not splitlines(): the JSON holds raw U+0085 and U+2028, which splitlines() cuts.
    lines = result.stdout.decode("utf-8").split("\n")
    outputs = [json.loads(line) for line in lines if line]
    assert len(outputs) == len(input_lines)
    return outputs


def _first_mismatch(expected, actual, inputs):
    for i, (e, a) in enumerate(zip(expected, actual)):
        if e != a:
            return f"input {inputs[i]!r}:\n expected {e!r}\n actual   {a!r}"
    return None


def decode_stream(tokenizer, ids, skip_special_tokens):
    stream = decoders.DecodeStream(skip_special_tokens=skip_special_tokens)
    pieces = [stream.step(tokenizer, i) for i in ids]
    return [p for p in pieces if p]


# ---------------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(BUILDERS))
@pytest.mark.parametrize("add_special_tokens", [True, False])
def test_encode_matches_tokenizers(name, add_special_tokens, trained, corpus, tmp_path):
    path, reference = trained[name]
    args = ["--tokenizer", str(path)] + ([] if add_special_tokens else ["--no-special-tokens"])
    actual = [out["ids"] for out in run_baton(args, corpus, tmp_path)]
    expected = [reference.encode(text, add_special_tokens=add_special_tokens).ids
                for text in corpus]
    mismatch = _first_mismatch(expected, actual, corpus)
    assert mismatch is None, f"{name}: {mismatch}"


@pytest.mark.parametrize("name", list(BUILDERS))
def test_encode_long_document_matches_tokenizers(name, trained, machine_text, tmp_path):
    path, reference = trained[name]
    document = "\n\n".join(machine_text)[:400_000]
    (tmp_path / "doc.txt").write_text(document, encoding="utf-8")
    result = subprocess.run(
        [str(BATON), "tokenize", "--tokenizer", str(path), "--input", str(tmp_path / "doc.txt")],
        capture_output=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    assert json.loads(result.stdout)["ids"] == reference.encode(document).ids


@pytest.mark.parametrize("name", list(BUILDERS))
@pytest.mark.parametrize("skip_special_tokens", [False, True])
def test_decode_and_incremental_decode_match_tokenizers(name, skip_special_tokens, trained, corpus,
                                                        tmp_path):
    path, reference = trained[name]
    id_lists = [reference.encode(text).ids for text in corpus]
    args = ["--tokenizer", str(path), "--decode", "--incremental"]
    if skip_special_tokens:
        args.append("--no-special-tokens")
    outputs = run_baton(args, id_lists, tmp_path)
    for text, ids, out in zip(corpus, id_lists, outputs):
        expected = reference.decode(ids, skip_special_tokens=skip_special_tokens)
        assert out["text"] == expected, f"{name}: decode of {text!r}"
        assert "".join(out["pieces"]) == expected, f"{name}: incremental decode of {text!r}"
        if "\ufffd" not in expected and hasattr(decoders, "DecodeStream"):
            # Piece by piece as tokenizers' own streaming decoder.
            assert [p for p in out["pieces"] if p] == decode_stream(
                reference, ids, skip_special_tokens), f"{name}: stream of {text!r}"


@pytest.mark.parametrize("name", list(BUILDERS))
def test_decode_random_ids_matches_tokenizers(name, trained, tmp_path):
    path, reference = trained[name]
    rng = random.Random(99)
    vocab_size = reference.get_vocab_size(with_added_tokens=True)
    byte_ids = [reference.token_to_id(t) for t in BYTE_TOKENS if reference.token_to_id(t) is not None]
    id_lists = []
    for _ in range(300):
        length = rng.randint(1, 30)
        ids = []
        for _ in range(length):
            if byte_ids and rng.random() < 0.4:
                ids.append(rng.choice(byte_ids))
            else:
                ids.append(rng.randrange(vocab_size))
        id_lists.append(ids)
    outputs = run_baton(["--tokenizer", str(path), "--decode", "--incremental"], id_lists, tmp_path)
    for ids, out in zip(id_lists, outputs):
        expected = reference.decode(ids, skip_special_tokens=False)
        assert out["text"] == expected, f"{name}: decode of {ids}"
        if name in BYTE_LEVEL:
            # Exact for any ids with byte-level decoding (see incremental_detokenizer.h).
            assert "".join(out["pieces"]) == expected, f"{name}: incremental decode of {ids}"


def test_bad_usage_exits_with_code_2(trained, tmp_path):
    path, _ = trained["gpt2"]
    cases = [
        ["tokenize", "--text", "hi"],
        ["tokenize", "--tokenizer", str(tmp_path / "missing.json"), "--text", "hi"],
        ["tokenize", "--tokenizer", str(path), "--text", "hi", "--input", str(path)],
        ["tokenize", "--tokenizer", str(path), "--decode", "--text", "1 two 3"],
    ]
    bad_json = tmp_path / "bad" / "tokenizer.json"
    bad_json.parent.mkdir()
    bad_json.write_text('{"model": {"type": "Unigram", "vocab": []}}')
    cases.append(["tokenize", "--tokenizer", str(bad_json), "--text", "hi"])
    for args in cases:
        result = subprocess.run([str(BATON), *args], capture_output=True, timeout=60)
        assert result.returncode == 2, args
        assert result.stdout == b"", args
        assert len(result.stderr.decode().strip().splitlines()) == 1, (args, result.stderr)
