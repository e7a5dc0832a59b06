"""`baton`'s exit codes as the README promises them: 0 for --help and --version, 2 for anything the
command line parser refuses (an unknown subcommand or flag, a value of the wrong type, a missing
subcommand), with the reason on stderr."""

from __future__ import annotations

import re

import pytest


@pytest.mark.engine
def test_version_and_help_exit_zero(run_baton):
    version = run_baton("--version")
    assert re.fullmatch(r"baton \d+\.\d+\.\d+\n", version.stdout), version.stdout
    assert run_baton("serve", "--help").stdout.startswith("Start the scheduler")


@pytest.mark.engine
@pytest.mark.parametrize("args, says", [
    ((), "A subcommand is required"),
    (("no-such-command",), "no-such-command"),
    (("serve", "--port", "not-a-port"), "--port"),
    (("serve", "--port", "70000"), "--port"),
    (("generate", "--no-such-flag"), "--no-such-flag"),
    (("bench", "--seed", "-1x"), "--seed"),
    (("generate", "--prompt", "x", "--max-model-len", "4096"), "--max-model-len 4096 exceeds the model's max_position_embeddings 2048"),
    (("generate", "--prompt", "x", "--kv-cache-mib", "1"), "raise the KV budget (kv_cache_bytes; --kv-cache-mib)"),
])
def test_parse_errors_exit_two_and_say_why(run_baton, args, says):
    proc = run_baton(*args, check=False)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert says in proc.stderr, proc.stderr


# vLLM's `serve` flags (issue 17): each bad value is one line on stderr and exit code 2, before any
# process starts.
@pytest.mark.engine
@pytest.mark.parametrize("args, line", [
    (("--dtype", "fp8"), "baton serve: --dtype 'fp8': expected one of auto, float32, float, bfloat16, "
                         "float16, half, f32, bf16 or f16"),
    (("--max-model-len", "4097"), "baton serve: max_model_len 4097 exceeds the model's "
                                  "max_position_embeddings 2048 ("),
    (("--max-model-len", "0"), "baton serve: --max-model-len: must be >= 1, got 0"),
    (("--served-model-name", ""), "baton serve: --served-model-name: must not be empty"),
    (("--model", "/"), "baton serve: MODEL '{model}' and --model '/' name different models; give one "
                       "of them"),
    (("--port", "9001", "--http-port", "9002"), "baton serve: --port 9001 and --http-port 9002 both set "
                                                "the OpenAI HTTP port; give --port only"),
    (("--port", "50051"), "baton serve: "),  # the HTTP port on the gRPC port: a port used twice
    (("--tensor-parallel-size", "4"), "baton serve: prefill: tp 4 x pp 1 does not fit the model"),
    (("--gpu-memory-utilization", "1.5"), "baton serve: --gpu-memory-utilization: must be in (0, 1], "
                                          "got 1.5"),
    (("--kv-cache-dtype", "fp8"), "baton serve: --kv-cache-dtype 'fp8': expected f32, bf16 or auto"),
    (("--swap-space", "-1"), "baton serve: --swap-space: must be in [0, 1048576] GiB, got -1"),
    (("--tool-call-parser", "xml"), "baton serve: 'xml' is not a tool-call parser (expected one of hermes, "
                                    "llama3_json, mistral)"),
    (("--enable-auto-tool-choice",), "baton serve: --enable-auto-tool-choice needs --tool-call-parser"),
    (("--reasoning-parser", "o1"), "baton serve: 'o1' is not a reasoning parser"),
    (("--seed", "1"), "baton serve: --seed is vLLM's server-wide seed; here each request's `seed` seeds it"),
    (("--tokenizer", "x"), "baton serve: --tokenizer is vLLM's; here the model directory's tokenizer.json"),
    (("--bogus",), "baton serve: unknown argument '--bogus' (`baton serve --help` lists the flags)"),
    (("--enable-chunked-prefill",), "baton serve: --enable-chunked-prefill: only colocated instances chunk"),
    (("--max-num-seqs", "0"), "baton serve: --max-num-seqs: must be >= 1, got 0"),
], ids=["dtype", "max-model-len-too-large", "max-model-len-0", "served-model-name-empty",
        "model-twice", "port-and-http-port", "port-clash", "tp-with-positional-model",
        "gpu-memory-utilization", "kv-cache-dtype", "swap-space-negative", "tool-call-parser",
        "auto-tool-choice-alone", "reasoning-parser", "vllm-seed", "vllm-tokenizer", "unknown-flag",
        "chunked-prefill-disaggregated", "max-num-seqs-0"])
def test_serve_vllm_flag_errors_are_one_line_and_exit_2(run_baton, tiny_model, args, line):
    proc = run_baton("serve", str(tiny_model), *args, check=False, timeout=30)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(line.format(model=tiny_model)), proc.stderr


@pytest.mark.engine
def test_serve_positional_model_must_be_a_directory(run_baton, tmp_path):
    proc = run_baton("serve", str(tmp_path / "nope"), check=False, timeout=30)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == f"baton serve: model: {tmp_path / 'nope'} is not a directory\n"


@pytest.mark.engine
def test_serve_http_port_is_a_deprecated_alias_of_port(run_baton, tiny_model):
    # One deprecation line, then the run goes on as with --port (here to a bad --dtype's error).
    proc = run_baton("serve", str(tiny_model), "--http-port", "0", "--dtype", "nope", check=False,
                     timeout=30)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 2, proc.stderr
    assert lines[0] == ("baton serve: --http-port is deprecated and goes in the next release; use --port "
                        "(the OpenAI HTTP port; --grpc-port is the gRPC one)")
    assert lines[1].startswith("baton serve: --dtype 'nope'")
