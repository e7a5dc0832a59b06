#!/usr/bin/env python3
"""Hugging Face transformers on PyTorch on the shapes baton_gpu_bench runs: the baseline of its figures.

    python3 benchmarks/gpu/transformers_baseline.py                 # Llama-3-8B shape, cuda:0
    python3 benchmarks/gpu/transformers_baseline.py --layers 4 --out hf.json

A LlamaForCausalLM with random bf16 weights (LlamaConfig, no checkpoint) on the GPU, sdpa attention
and transformers' own bf16 KV cache, timed the way baton_gpu_bench times the engine:
  roofline  torch's device-to-device copy (GB/s, read + written) and a bf16 matmul (TFLOP/s), best of
            --repeats after a warm-up, CUDA events;
  prefill   one prompt of each --prefill-lens length (logits of the last token only), best of
            --repeats after a warm-up;
  decode    --batches sequences with --context-len prompts prefilled together, --warmup-steps
            untimed greedy steps, then --decode-steps timed ones; tokens/s over the batch.
The work per prefill/decode step is counted as in benchmarks/gpu/model_cost.h (mirrored below), with
a bf16 KV cache. Prints one JSON object with baton_gpu_bench's keys ("runner": "transformers").

Needs PyTorch with CUDA and transformers (present on the GPU machine, not in this repository's
environment); without them it stops with one line saying so. Nothing is imported before main().
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
import time

DECODE_TARGET = 0.8
PREFILL_TARGET = 0.5


# ---- the cost model of benchmarks/gpu/model_cost.h (keep the two in step) ----
def head_dim(s: dict) -> int:
    return s["hidden_size"] // s["num_heads"]


def layer_matmul_params(s: dict) -> float:
    h, q, kv = s["hidden_size"], s["num_heads"] * head_dim(s), s["num_kv_heads"] * head_dim(s)
    return h * q + 2 * h * kv + q * h + 3 * h * s["intermediate_size"]


def decode_matmul_params(s: dict) -> float:
    return s["num_layers"] * layer_matmul_params(s) + s["vocab_size"] * s["hidden_size"]


def kv_elems_per_token(s: dict) -> float:
    return 2.0 * s["num_layers"] * s["num_kv_heads"] * head_dim(s)


def decode_bytes_per_step(s: dict, batch: int, mean_context: float, kv_bytes: float) -> float:
    return decode_matmul_params(s) * 2 + kv_elems_per_token(s) * kv_bytes * batch * mean_context


def prefill_flops(s: dict, t: int) -> float:
    return (2.0 * s["num_layers"] * layer_matmul_params(s) * t + 2.0 * s["vocab_size"] * s["hidden_size"]
            + 2.0 * s["num_layers"] * s["num_heads"] * head_dim(s) * t * (t + 1))


def mean_decode_context(context_len: int, steps: int) -> float:
    return context_len + 1 + (steps - 1) / 2.0


# ---- measurement ----
def best_seconds(torch, repeats: int, fn) -> float:
    fn()  # warm-up
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = None
    for _ in range(repeats):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        ms = start.elapsed_time(stop)
        best = ms if best is None else min(best, ms)
    return best / 1e3


def measure_roofline(torch, args) -> dict:
    n = args.copy_mib << 20
    src = torch.ones(n, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    copy_s = best_seconds(torch, args.repeats_roofline, lambda: dst.copy_(src))
    del src, dst
    m = args.gemm_size
    a = torch.rand(m, m, device="cuda", dtype=torch.bfloat16) * 2 - 1
    b = torch.rand(m, m, device="cuda", dtype=torch.bfloat16) * 2 - 1
    gemm_s = best_seconds(torch, args.repeats_roofline, lambda: torch.matmul(a, b))
    del a, b
    torch.cuda.empty_cache()
    return {"copy_bytes": n, "copy_GBps": 2.0 * n / copy_s / 1e9, "gemm_mnk": [m, m, m],
            "gemm_TFLOPs": 2.0 * m * m * m / gemm_s / 1e12}


def make_model(torch, transformers, s: dict, max_positions: int):
    config = transformers.LlamaConfig(
        hidden_size=s["hidden_size"], num_hidden_layers=s["num_layers"], num_attention_heads=s["num_heads"],
        num_key_value_heads=s["num_kv_heads"], intermediate_size=s["intermediate_size"],
        vocab_size=s["vocab_size"], max_position_embeddings=max_positions, rope_theta=500000.0,
        rms_norm_eps=1e-5, tie_word_embeddings=False)
    config._attn_implementation = "sdpa"
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)  # built in bf16 on the GPU: no f32 copy of 8B weights
    try:
        with torch.device("cuda"):
            model = transformers.LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    return model.eval()


def last_logits_kwargs(model) -> dict:
    """Ask for the last token's logits only (as the engine computes), under whichever name this
    transformers version uses."""
    params = inspect.signature(model.forward).parameters
    for name in ("logits_to_keep", "num_logits_to_keep"):
        if name in params:
            return {name: 1}
    return {}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--layers", type=int, default=32)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--intermediate", type=int, default=14336)
    p.add_argument("--vocab", type=int, default=128256)
    p.add_argument("--prefill-lens", type=lambda t: [int(x) for x in t.split(",")], default=[512, 2048])
    p.add_argument("--batches", type=lambda t: [int(x) for x in t.split(",")], default=[1, 32, 128])
    p.add_argument("--context-len", type=int, default=512)
    p.add_argument("--decode-steps", type=int, default=32)
    p.add_argument("--warmup-steps", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--repeats-roofline", type=int, default=10)
    p.add_argument("--copy-mib", type=int, default=4096)
    p.add_argument("--gemm-size", type=int, default=8192)
    p.add_argument("--out", help="also write the JSON here")
    # baton_gpu_bench's other flags, accepted so that one argument list drives both (run.sh).
    p.add_argument("--device", default="cuda", choices=["cuda"], help="only cuda (the current device)")
    p.add_argument("--work-dir", help="ignored (baton_gpu_bench's checkpoint directory)")
    p.add_argument("--threads", type=int, help="ignored (baton_gpu_bench's generator threads)")
    args = p.parse_args(argv)

    try:
        import torch
        import transformers
    except ImportError as e:
        print(f"transformers_baseline: needs PyTorch and transformers ({e}); run it on the GPU machine",
              file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("transformers_baseline: torch sees no CUDA device (torch.cuda.is_available() is False)",
              file=sys.stderr)
        return 1

    s = {"hidden_size": args.hidden, "num_layers": args.layers, "num_heads": args.heads,
         "num_kv_heads": args.kv_heads, "intermediate_size": args.intermediate, "vocab_size": args.vocab}
    shape = dict(s, head_dim=head_dim(s), decode_matmul_params=decode_matmul_params(s))
    roofline = measure_roofline(torch, args)
    print(f"transformers_baseline: copy {roofline['copy_GBps']:.1f} GB/s, "
          f"bf16 GEMM {roofline['gemm_TFLOPs']:.1f} TFLOP/s", file=sys.stderr)
    decode_len = args.context_len + args.warmup_steps + args.decode_steps + 1
    model = make_model(torch, transformers, s, max(8192, max(args.prefill_lens) + 1, decode_len))
    keep = last_logits_kwargs(model)
    gen = torch.Generator(device="cuda").manual_seed(42)

    def prompt(batch: int, length: int):
        return torch.randint(0, args.vocab, (batch, length), device="cuda", generator=gen)

    result = {"runner": "transformers", "device": "cuda", "device_name": torch.cuda.get_device_name(),
              "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
              "shape": shape, "weight_dtype": "bf16", "kv_dtype": "bf16", "roofline": roofline,
              "prefill": {}, "decode": {}}
    with torch.inference_mode():
        for length in args.prefill_lens:
            ids = prompt(1, length)
            seconds = best_seconds(torch, args.repeats, lambda: model(ids, use_cache=True, **keep))
            tflops = prefill_flops(s, length) / seconds / 1e12
            result["prefill"][str(length)] = {
                "tokens_per_s": length / seconds, "seconds": seconds, "flops": prefill_flops(s, length),
                "achieved_TFLOPs": tflops, "share_of_gemm": tflops / roofline["gemm_TFLOPs"]}
            print(f"transformers_baseline: prefill {length}: {length / seconds:.0f} tok/s", file=sys.stderr)
        mean_ctx = mean_decode_context(args.context_len + args.warmup_steps, args.decode_steps)
        for batch in args.batches:
            out = model(prompt(batch, args.context_len), use_cache=True, **keep)
            past, token = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
            for step in range(args.warmup_steps + args.decode_steps):
                if step == args.warmup_steps:
                    torch.cuda.synchronize()
                    start = time.perf_counter()
                out = model(token, past_key_values=past, use_cache=True)
                past, token = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
            torch.cuda.synchronize()
            tokens_per_s = batch * args.decode_steps / (time.perf_counter() - start)
            bytes_per_step = decode_bytes_per_step(s, batch, mean_ctx, 2)
            gbps = bytes_per_step * tokens_per_s / batch / 1e9
            result["decode"][str(batch)] = {
                "tokens_per_s": tokens_per_s, "context_len": args.context_len, "mean_context_len": mean_ctx,
                "steps": args.decode_steps, "bytes_per_step": bytes_per_step, "achieved_GBps": gbps,
                "share_of_copy": gbps / roofline["copy_GBps"]}
            print(f"transformers_baseline: decode batch {batch}: {tokens_per_s:.1f} tok/s", file=sys.stderr)
            del out, past, token
            torch.cuda.empty_cache()

    shares = {k: v["share_of_gemm"] for k, v in result["prefill"].items()}
    result["targets"] = {"prefill_share_of_gemm": {"min": PREFILL_TARGET, "values": shares,
                                                   "met": all(v >= PREFILL_TARGET for v in shares.values())}}
    if "1" in result["decode"]:
        share = result["decode"]["1"]["share_of_copy"]
        result["targets"]["decode_batch1_share_of_copy"] = {"min": DECODE_TARGET, "value": share,
                                                            "met": share >= DECODE_TARGET}
    text = json.dumps(result, indent=2, sort_keys=True)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
