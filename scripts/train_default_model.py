#!/usr/bin/env python3
"""Trains Baton's embedded default model: a small Llama on the King James Bible, with a few chat turns.

    python3 -m venv /tmp/trainenv && /tmp/trainenv/bin/pip install jax optax tokenizers safetensors
    /tmp/trainenv/bin/python scripts/train_default_model.py --out models/kjv-tiny [--minutes 25]

Writes a Hugging Face Llama checkpoint (config.json, generation_config.json, model.safetensors in
bf16, tokenizer.json trained here with the `tokenizers` library, tokenizer_config.json with a Llama-3
chat template) plus heldout.txt, the chapters kept out of training, which `baton eval` scores.

The corpus is the output of Debian's `bible` program (package bible-kjv, text in bible-kjv-text; the
KJV of 1611 is public domain): the installed program, or else both packages fetched with
`apt-get download` and unpacked into --cache-dir. Installing them is not needed and changes the
test checkpoints' tokenizer corpus (make_checkpoint.py reads /usr/share/doc). Each chapter becomes
one paragraph of its verses. Every HELDOUT_EVERY-th chapter is held out. Chat samples
are made from the training chapters only: a user asks for a verse by its reference and the assistant
answers with the verse (two a chapter), or gives a verse's first words and gets the rest (one).

JAX (CPU) does the training; it is this script's dependency only, not Baton's. The forward pass is
Llama's as Hugging Face computes it (RMSNorm, rotate-half RoPE, grouped-query attention, SwiGLU, tied
embeddings), so the checkpoint loads anywhere a Llama does. Same seed, same machine: same weights; XLA
may round differently on another CPU.
"""

from __future__ import annotations

import argparse
import math
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_checkpoint as mc  # noqa: E402  (the checkpoint writers and the tokenizer conventions)

HELDOUT_EVERY = 25  # every 25th chapter (~47 of 1,189) is held out
SPECIAL_TOKENS = ("<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                  "<|eot_id|>")
EOT_ID = 4
VOCAB_SIZE = 4096
SHAPE = mc.ModelShape("LlamaForCausalLM", hidden_size=256, num_layers=4, num_heads=8, num_kv_heads=4,
                      intermediate_size=688, vocab_size=VOCAB_SIZE, tie_word_embeddings=True)
ROPE_THETA = 10000.0
RMS_EPS = 1e-5
SEQ_LEN = 256


# ---------------------------------------------------------------------------------------------------
# Corpus

def bible_command(cache: Path) -> list[str]:
    """Debian's `bible` program: the installed one, else the packages' own copy unpacked into cache
    (apt-get download needs no root, and nothing is installed on the machine)."""
    if shutil.which("bible"):
        return ["bible"]
    root = cache / "root"
    if not (root / "usr/bin/bible").exists():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(["apt-get", "download", "bible-kjv", "bible-kjv-text"], cwd=cache, check=True)
        for deb in sorted(cache.glob("*.deb")):
            subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    return [str(root / "usr/bin/bible"), "-p", str(root / "usr/lib")]


def read_bible(cache: Path) -> list[tuple[str, int, list[str]]]:
    """[(book, chapter, verses)] in canonical order, from Debian's `bible` program."""
    text = subprocess.run(bible_command(cache) + ["-l100000", "gen1:1-rev22:21"], check=True,
                          capture_output=True, text=True).stdout
    chapters: list[tuple[str, int, list[str]]] = []
    for line in text.splitlines():
        if m := re.fullmatch(r"(\S.*) (\d+)", line):
            chapters.append((m.group(1), int(m.group(2)), []))
        elif m := re.fullmatch(r"\s+(\d+) (.*)", line):
            chapters[-1][2].append(m.group(2).strip())
    if len(chapters) != 1189:
        sys.exit(f"train_default_model: expected 1189 chapters from `bible`, parsed {len(chapters)}")
    return chapters


# How the chat samples ask for a verse by its reference.
ASK_FOR_VERSE = ["What does {ref} say?", "Quote {ref}.", "Recite {ref} for me."]


def chat(user: str, assistant: str) -> str:
    """One exchange in the chat template's layout (what apply_chat_template renders, plus the answer)."""
    return (f"<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n{user}<|eot_id|>"
            f"<|start_header_id|>assistant<|end_header_id|>\n\n{assistant}<|eot_id|>")


def make_documents(chapters, rng: np.random.Generator) -> tuple[list[str], list[str], list[str]]:
    """(training prose, training chats, held-out prose); prose documents are whole chapters."""
    train, chats, heldout = [], [], []
    for idx, (book, number, verses) in enumerate(chapters):
        prose = " ".join(verses)
        if idx % HELDOUT_EVERY == HELDOUT_EVERY - 1:
            heldout.append(prose)
            continue
        train.append(prose)
        for v in rng.choice(len(verses), size=min(2, len(verses)), replace=False):
            question = ASK_FOR_VERSE[int(rng.integers(len(ASK_FOR_VERSE)))]
            chats.append(chat(question.format(ref=f"{book} {number}:{v + 1}"), verses[v]))
        v = int(rng.integers(len(verses)))
        words = verses[v].split()
        cut = max(1, len(words) // 3)
        chats.append(chat(f"Continue: {' '.join(words[:cut])}", " ".join(words[cut:])))
    return train, chats, heldout


def tokenizer_config() -> dict:
    def added(content: str) -> dict:
        return {"content": content, "lstrip": False, "normalized": False, "rstrip": False,
                "single_word": False, "special": True}

    return {
        "added_tokens_decoder": {str(i): added(t) for i, t in enumerate(SPECIAL_TOKENS)},
        "bos_token": "<|begin_of_text|>",
        "chat_template": mc.CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": True,
        "eos_token": "<|eot_id|>",
        "model_input_names": ["input_ids", "attention_mask"],
        "model_max_length": mc.MAX_POSITION_EMBEDDINGS,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }


def model_config() -> dict:
    config = mc.make_config(SHAPE, "bf16", None)
    config["eos_token_id"] = [1, EOT_ID]
    return config


# ---------------------------------------------------------------------------------------------------
# Model (JAX)

def init_params(key) -> dict:
    import jax
    import jax.numpy as jnp

    h, d = SHAPE.hidden_size, SHAPE.head_dim
    q_out, kv_out, ffn = SHAPE.num_heads * d, SHAPE.num_kv_heads * d, SHAPE.intermediate_size
    keys = iter(jax.random.split(key, 1 + 7 * SHAPE.num_layers))
    normal = lambda shape, std: std * jax.random.normal(next(keys), shape, jnp.float32)  # noqa: E731
    out_std = 0.02 / math.sqrt(2 * SHAPE.num_layers)  # GPT-2's scaled init of residual projections
    params = {"embed": normal((VOCAB_SIZE, h), 0.02), "norm": jnp.ones(h), "layers": []}
    for _ in range(SHAPE.num_layers):
        params["layers"].append({
            "attn_norm": jnp.ones(h), "mlp_norm": jnp.ones(h),
            "q": normal((q_out, h), 0.02), "k": normal((kv_out, h), 0.02),
            "v": normal((kv_out, h), 0.02), "o": normal((h, q_out), out_std),
            "gate": normal((ffn, h), 0.02), "up": normal((ffn, h), 0.02),
            "down": normal((h, ffn), out_std),
        })
    return params


def forward(params: dict, tokens):
    """Logits [batch, seq, vocab] of a Hugging Face LlamaForCausalLM with these weights."""
    import jax
    import jax.numpy as jnp

    b, t = tokens.shape
    nh, nkv, d = SHAPE.num_heads, SHAPE.num_kv_heads, SHAPE.head_dim
    inv_freq = 1.0 / (ROPE_THETA ** (jnp.arange(0, d, 2, dtype=jnp.float32) / d))
    angles = jnp.arange(t, dtype=jnp.float32)[:, None] * inv_freq[None, :]
    cos = jnp.concatenate([jnp.cos(angles)] * 2, -1)[None, :, None, :]
    sin = jnp.concatenate([jnp.sin(angles)] * 2, -1)[None, :, None, :]

    def rope(x):  # rotate-half, as transformers' apply_rotary_pos_emb
        x1, x2 = x[..., : d // 2], x[..., d // 2:]
        return x * cos + jnp.concatenate([-x2, x1], -1) * sin

    def rms(x, w):
        return x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + RMS_EPS) * w

    mask = jnp.tril(jnp.ones((t, t), bool))
    x = params["embed"][tokens]
    for layer in params["layers"]:
        y = rms(x, layer["attn_norm"])
        q = rope((y @ layer["q"].T).reshape(b, t, nh, d))
        k = rope((y @ layer["k"].T).reshape(b, t, nkv, d))
        v = (y @ layer["v"].T).reshape(b, t, nkv, d)
        k = jnp.repeat(k, nh // nkv, axis=2)
        v = jnp.repeat(v, nh // nkv, axis=2)
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d)
        scores = jnp.where(mask, scores, -1e9)
        attn = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(scores, -1), v).reshape(b, t, nh * d)
        x = x + attn @ layer["o"].T
        y = rms(x, layer["mlp_norm"])
        x = x + (jax.nn.silu(y @ layer["gate"].T) * (y @ layer["up"].T)) @ layer["down"].T
    return rms(x, params["norm"]) @ params["embed"].T


def loss_fn(params, batch):
    import jax
    import jax.numpy as jnp

    logits = forward(params, batch[:, :-1])
    logp = jax.nn.log_softmax(logits, -1)
    return -jnp.mean(jnp.take_along_axis(logp, batch[:, 1:, None], -1))


def hf_weights(params: dict) -> dict[str, np.ndarray]:
    out = {"model.embed_tokens.weight": params["embed"], "model.norm.weight": params["norm"]}
    names = {"attn_norm": "input_layernorm", "mlp_norm": "post_attention_layernorm",
             "q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj",
             "o": "self_attn.o_proj", "gate": "mlp.gate_proj", "up": "mlp.up_proj",
             "down": "mlp.down_proj"}
    for i, layer in enumerate(params["layers"]):
        for ours, theirs in names.items():
            out[f"model.layers.{i}.{theirs}.weight"] = layer[ours]
    return {k: np.asarray(v, np.float32) for k, v in out.items()}


# ---------------------------------------------------------------------------------------------------
# Driver

def pack(token_lists: list[list[int]], rng: np.random.Generator) -> np.ndarray:
    """Documents in a shuffled order, concatenated, cut into rows of SEQ_LEN + 1 tokens."""
    order = rng.permutation(len(token_lists))
    stream = np.concatenate([np.asarray(token_lists[i], np.int32) for i in order])
    rows = len(stream) // (SEQ_LEN + 1)
    return stream[: rows * (SEQ_LEN + 1)].reshape(rows, SEQ_LEN + 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--minutes", type=float, default=25.0, help="training time budget")
    parser.add_argument("--steps", type=int, default=0, help="steps to train (0: from --minutes)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache-dir", type=Path, default=Path("/tmp/baton-kjv"),
                        help="where the bible-kjv packages are unpacked when `bible` is not installed")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3)
    args = parser.parse_args(argv)

    import jax
    import jax.numpy as jnp
    import optax

    rng = np.random.default_rng(args.seed)
    train, chats, heldout = make_documents(read_bible(args.cache_dir), rng)
    tokenizer = mc.train_tokenizer(train + chats, VOCAB_SIZE, SPECIAL_TOKENS)
    encode = lambda texts, special: [e.ids for e in tokenizer.encode_batch(  # noqa: E731
        texts, add_special_tokens=special)]
    # Prose documents start with <|begin_of_text|> and end with <|end_of_text|>, as a served prompt
    # starts; chats carry their own specials.
    docs = [ids + [1] for ids in encode(train, True)] + encode(chats, False)
    print(f"{len(train)} chapters + {len(chats)} chats = {sum(map(len, docs))} training tokens; "
          f"{len(heldout)} held-out chapters", flush=True)

    params = init_params(jax.random.PRNGKey(args.seed))
    print(f"{sum(x.size for x in jax.tree_util.tree_leaves(params)) / 1e6:.2f}M parameters", flush=True)
    # Linear warm-up, then cosine to zero at the last step. Without --steps the step count comes from
    # the first steps' speed and the time budget (it is printed: pass it as --steps to repeat a run).
    optimizer = optax.chain(optax.clip_by_global_norm(1.0), optax.inject_hyperparams(optax.adamw)(
        learning_rate=args.lr, b1=0.9, b2=0.95, weight_decay=0.1))
    opt_state = optimizer.init(params)

    @jax.jit
    def step(params, opt_state, batch):
        loss, grads = jax.value_and_grad(loss_fn)(params, batch)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    def learning_rate(n: int, total: int) -> float:
        return args.lr * min(1.0, (n + 1) / 100) * 0.5 * (1 + math.cos(math.pi * min(1.0, n / total)))

    heldout_rows = pack([ids + [1] for ids in encode(heldout, True)], np.random.default_rng(0))[:64]
    eval_loss = jax.jit(loss_fn)
    total = args.steps or 10**9
    start, n, epoch = time.monotonic(), 0, 0
    while n < total:
        rows = pack(docs, rng)
        epoch += 1
        for i in range(0, len(rows) - args.batch + 1, args.batch):
            if n >= total:
                break
            opt_state[1].hyperparams["learning_rate"] = jnp.asarray(learning_rate(n, total))
            params, opt_state, loss = step(params, opt_state, jnp.asarray(rows[i: i + args.batch]))
            n += 1
            if n == 1:
                jax.block_until_ready(loss)
                compiled = time.monotonic()
            if n == 11 and not args.steps:
                jax.block_until_ready(loss)
                per_step = (time.monotonic() - compiled) / 10
                total = max(200, int((args.minutes * 60 - (compiled - start)) / per_step / 1.03))
                print(f"{per_step:.2f} s/step: {total} steps (--steps {total} repeats this run)",
                      flush=True)
            if n % 100 == 0:
                print(f"step {n}/{total} epoch {epoch} loss {float(loss):.3f} "
                      f"held-out {float(eval_loss(params, jnp.asarray(heldout_rows))):.3f} "
                      f"{(time.monotonic() - start) / 60:.1f} min", flush=True)

    held = float(eval_loss(params, jnp.asarray(heldout_rows)))
    print(f"done: {n} steps, held-out loss {held:.3f} (perplexity {math.exp(held):.1f})", flush=True)

    out = args.out.resolve()
    tmp = out.parent / f".{out.name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    (tmp / "config.json").write_text(mc.dump_json(model_config()))
    generation = mc.make_generation_config()
    generation["eos_token_id"] = [1, EOT_ID]
    (tmp / "generation_config.json").write_text(mc.dump_json(generation))
    (tmp / "tokenizer.json").write_text(tokenizer.to_str(pretty=True))
    (tmp / "tokenizer_config.json").write_text(mc.dump_json(tokenizer_config()))
    mc.save_safetensors(tmp / "model.safetensors", hf_weights(params), "bf16")
    (tmp / "heldout.txt").write_text("\n\n".join(heldout) + "\n")
    # File by file, so that what else the directory holds (its README.md, the model card) stays.
    out.mkdir(parents=True, exist_ok=True)
    for f in tmp.iterdir():
        f.chmod(0o644)  # safetensors creates its files owner-only.
        f.replace(out / f.name)
    tmp.rmdir()
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
