"""Quantized weights (issue 41): `--quantization int8` and `fp8` quantize the matmul weights at load
(one scale per output row), `--quantization int4` in groups of columns; pre-quantized checkpoints
(compressed-tensors int8, int4 and fp8, AWQ, block-wise fp8) are read as they are stored. On the
trained default model the held-out perplexity stays within 0.5% of bf16 weights for int8, 1% for
fp8 and 3% for int4, a served disaggregated deployment answers as the in-process engine does, and
what is not supported is refused in one line."""

from __future__ import annotations

import json
import shutil
import struct
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from serving_fixtures import DeploymentFactory

MODEL = Path(__file__).resolve().parents[2] / "models" / "kjv-4m"
EVAL_ARGS = ("--window", "256", "--max-text-tokens", "8192", "--json")
# The bounds for int8 and int4 weights against bf16 ones.
INT8_RATIO_LIMIT = 1.005
INT4_RATIO_LIMIT = 1.03
FP8_RATIO_LIMIT = 1.01


def read_safetensors(path: Path) -> dict[str, tuple[str, list[int], bytes]]:
    data = path.read_bytes()
    (header_len,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + header_len])
    body = data[8 + header_len:]
    return {name: (entry["dtype"], entry["shape"], body[entry["data_offsets"][0]:entry["data_offsets"][1]])
            for name, entry in header.items() if name != "__metadata__"}


def write_safetensors(path: Path, tensors: dict[str, tuple[str, list[int], bytes]]) -> None:
    header, offset, blobs = {}, 0, []
    for name, (dtype, shape, blob) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def bf16_to_f32(blob: bytes) -> np.ndarray:
    return (np.frombuffer(blob, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(values: np.ndarray) -> bytes:
    bits = values.astype(np.float32).view(np.uint32)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16  # nearest even (no NaNs here)
    return rounded.astype(np.uint16).tobytes()


def rewrite_linears(source: Path, out: Path, quantize, quantization_config: dict,
                    skip: str | None = None) -> None:
    """A copy of the bf16 checkpoint `source` at `out` whose Linear weights (`*_proj.weight`, but
    those whose names contain `skip`) are replaced by quantize(module, w): the tensors a format
    stores for the module, {name: (dtype, shape, bytes)}; config.json gains quantization_config."""
    shutil.copytree(source, out)
    result = {}
    for name, (dtype, shape, blob) in read_safetensors(source / "model.safetensors").items():
        if not name.endswith("_proj.weight") or (skip is not None and skip in name):
            result[name] = (dtype, shape, blob)
            continue
        assert dtype == "BF16", (name, dtype)
        result.update(quantize(name[:-len(".weight")], bf16_to_f32(blob).reshape(shape)))
    write_safetensors(out / "model.safetensors", result)
    config = json.loads((source / "config.json").read_text())
    config["quantization_config"] = quantization_config
    (out / "config.json").write_text(json.dumps(config, indent=2))


def write_compressed_tensors_int8(source: Path, out: Path, layout: str) -> None:
    """The default model as llm-compressor writes a channel-wise int8 scheme (compressed-tensors):
    scale = max|w| / 127.5 in the weights' dtype, q = clamp(round(w / scale), -128, 127), every
    Linear but lm_head; `int-quantized` stores q as I8, `pack-quantized` four to an I32 word as
    q + 128, low byte first."""
    def quantize(module, w):
        shape = list(w.shape)
        scale_bf16 = f32_to_bf16(np.abs(w).max(axis=1, keepdims=True) / np.float32(127.5))
        scale = bf16_to_f32(scale_bf16).reshape(shape[0], 1)
        q = np.clip(np.round(w / scale), -128, 127).astype(np.int8)
        tensors = {f"{module}.weight_scale": ("BF16", [shape[0], 1], scale_bf16)}
        if layout == "int-quantized":
            tensors[f"{module}.weight"] = ("I8", shape, q.tobytes())
        else:
            words = -(-shape[1] // 4)
            padded = np.zeros((shape[0], words * 4), dtype=np.uint8)
            padded[:, :shape[1]] = (q.astype(np.int16) + 128).astype(np.uint8)
            tensors[f"{module}.weight_packed"] = ("I32", [shape[0], words], padded.tobytes())
            tensors[f"{module}.weight_shape"] = ("I64", [2], np.array(shape, dtype=np.int64).tobytes())
        return tensors
    rewrite_linears(source, out, quantize, {
        "quant_method": "compressed-tensors", "format": layout, "quantization_status": "compressed",
        "ignore": ["lm_head"], "kv_cache_scheme": None,
        "config_groups": {"group_0": {
            "targets": ["Linear"],
            "weights": {"num_bits": 8, "type": "int", "symmetric": True, "strategy": "channel",
                        "group_size": None, "dynamic": False, "actorder": None},
            "input_activations": None}}})


@pytest.mark.engine
def test_a_compressed_tensors_int8_checkpoint_is_read_in_both_layouts(run_baton, tmp_path):
    """Detected from config.json (no flag); both layouts hold the same integers, so they score
    alike, and within the int8 bound of bf16."""
    scores = {}
    for layout in ("int-quantized", "pack-quantized"):
        model = tmp_path / layout
        write_compressed_tensors_int8(MODEL, model, layout)
        scores[layout] = eval_json(run_baton, "--model", str(model))
        assert scores[layout]["dtype"] == "i8", scores[layout]
    assert scores["int-quantized"]["perplexity"] == scores["pack-quantized"]["perplexity"]
    bf16 = eval_json(run_baton, "--dtype", "bf16")["perplexity"]
    assert scores["int-quantized"]["perplexity"] / bf16 <= INT8_RATIO_LIMIT, (bf16, scores)


def eval_json(run_baton, *args) -> dict:
    return json.loads(run_baton("eval", *EVAL_ARGS, *args, timeout=300).stdout)


@pytest.mark.engine
def test_int8_weights_stay_within_half_a_percent_of_bf16(run_baton):
    bf16 = eval_json(run_baton, "--dtype", "bf16")
    int8 = eval_json(run_baton, "--quantization", "int8")
    assert int8["dtype"] == "i8" and bf16["dtype"] == "bf16"
    assert int8["perplexity"] / bf16["perplexity"] <= INT8_RATIO_LIMIT, (bf16, int8)


@pytest.mark.engine
def test_int4_weights_stay_within_three_percent_of_bf16(run_baton):
    bf16 = eval_json(run_baton, "--dtype", "bf16")
    int4 = eval_json(run_baton, "--quantization", "int4")
    assert int4["dtype"] == "i4"
    assert int4["perplexity"] / bf16["perplexity"] <= INT4_RATIO_LIMIT, (bf16, int4)


@pytest.mark.engine
def test_fp8_weights_stay_within_one_percent_of_bf16(run_baton):
    bf16 = eval_json(run_baton, "--dtype", "bf16")
    fp8 = eval_json(run_baton, "--quantization", "fp8")
    assert fp8["dtype"] == "fp8"
    assert fp8["perplexity"] / bf16["perplexity"] <= FP8_RATIO_LIMIT, (bf16, fp8)


def e4m3_values() -> np.ndarray:
    """The 127 non-negative finite E4M3 values by code (0 .. 0x7E), from the OCP definition:
    2^(e - 7) * (1 + m / 8), or m * 2^-9 when e = 0."""
    codes = np.arange(0x7F)
    e, m = codes >> 3, codes & 7
    return np.where(e == 0, m * 2.0 ** -9, 2.0 ** (e - 7) * (1 + m / 8)).astype(np.float32)


def to_e4m3(x: np.ndarray) -> np.ndarray:
    """The nearest E4M3 code of each value (ties to the even code), saturating at 448, as torch's
    `.to(torch.float8_e4m3fn)` after the clamp every fp8 quantizer applies."""
    values = e4m3_values()
    magnitude = np.minimum(np.abs(x).astype(np.float64), 448.0)
    high = np.clip(np.searchsorted(values, magnitude), 1, len(values) - 1)
    low = high - 1
    d_low, d_high = magnitude - values[low], values[high] - magnitude
    code = np.where((d_high < d_low) | ((d_high == d_low) & (high % 2 == 0)), high, low)
    return (code | np.where(np.signbit(x), 0x80, 0)).astype(np.uint8)


def write_fp8_blocks(source: Path, out: Path, block: int, skip: str) -> None:
    """The default model as transformers' FineGrainedFP8 (DeepSeek-V3, Qwen3-FP8) stores it:
    `weight` F8_E4M3 and `weight_scale_inv` f32 [ceil(out / block), ceil(in / block)], scale =
    max|w| / 448 over each block (a partial last block of rows included). Modules whose names
    contain `skip` stay bf16 (down_proj's 688-wide rows are no whole number of blocks)."""
    def quantize(module, w):
        rows, cols = w.shape
        block_rows, block_cols = -(-rows // block), cols // block
        scales = np.zeros((block_rows, block_cols), dtype=np.float32)
        codes = np.zeros(w.shape, dtype=np.uint8)
        for i in range(block_rows):
            for j in range(block_cols):
                part = w[i * block:(i + 1) * block, j * block:(j + 1) * block]
                scale = np.float32(max(np.abs(part).max(), 1e-12) / 448.0)
                scales[i, j] = scale
                codes[i * block:(i + 1) * block, j * block:(j + 1) * block] = to_e4m3(part / scale)
        return {f"{module}.weight": ("F8_E4M3", [rows, cols], codes.tobytes()),
                f"{module}.weight_scale_inv": ("F32", [block_rows, block_cols], scales.tobytes())}
    rewrite_linears(source, out, quantize, {"quant_method": "fp8", "fmt": "e4m3",
                                            "activation_scheme": "dynamic",
                                            "weight_block_size": [block, block],
                                            "modules_to_not_convert": [skip]}, skip)


def write_compressed_tensors_fp8(source: Path, out: Path) -> None:
    """llm-compressor's FP8_DYNAMIC scheme: fp8 weights with one bf16 scale per output channel
    (max|w| / 448), `float-quantized`, every Linear but lm_head; the activations' dynamic per-token
    fp8 (not applied by Baton, which multiplies bf16 activations)."""
    def quantize(module, w):
        scale_bf16 = f32_to_bf16(np.abs(w).max(axis=1, keepdims=True) / np.float32(448))
        scale = bf16_to_f32(scale_bf16).reshape(w.shape[0], 1)
        return {f"{module}.weight": ("F8_E4M3", list(w.shape), to_e4m3(w / scale).tobytes()),
                f"{module}.weight_scale": ("BF16", [w.shape[0], 1], scale_bf16)}
    rewrite_linears(source, out, quantize, {
        "quant_method": "compressed-tensors", "format": "float-quantized",
        "quantization_status": "compressed", "ignore": ["lm_head"],
        "config_groups": {"group_0": {
            "targets": ["Linear"],
            "weights": {"num_bits": 8, "type": "float", "symmetric": True, "strategy": "channel",
                        "dynamic": False, "observer": "minmax"},
            "input_activations": {"num_bits": 8, "type": "float", "symmetric": True,
                                  "strategy": "token", "dynamic": True}}}})


@pytest.mark.engine
def test_block_wise_and_compressed_tensors_fp8_checkpoints_are_read(run_baton, tmp_path):
    """Detected from config.json; each within the fp8 bound of bf16."""
    bf16 = eval_json(run_baton, "--dtype", "bf16")["perplexity"]
    write_fp8_blocks(MODEL, tmp_path / "blocks", 128, "down_proj")
    write_compressed_tensors_fp8(MODEL, tmp_path / "channel")
    for model in ("blocks", "channel"):
        score = eval_json(run_baton, "--model", str(tmp_path / model))
        assert score["dtype"] == "fp8", score
        assert score["perplexity"] / bf16 <= FP8_RATIO_LIMIT, (model, bf16, score)


def test_the_numpy_e4m3_encoder_is_the_formats_rounding():
    """The writers' reference quantizer: every code's value encodes to itself, midpoints to the even
    neighbour, and beyond 448 saturates."""
    values = e4m3_values()
    assert values[0x7E] == 448 and values[1] == 2.0 ** -9
    assert (to_e4m3(values) == np.arange(0x7F)).all()
    assert (to_e4m3(-values[1:]) == np.arange(1, 0x7F) | 0x80).all()
    mids = (values[:-1] + values[1:]) / 2
    assert (to_e4m3(mids) == (np.arange(0x7E) + 1) // 2 * 2).all()
    assert to_e4m3(np.array([1e6], dtype=np.float32))[0] == 0x7E


def awq_round_to_nearest(w: np.ndarray, group: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """AutoAWQ's zero-point quantizer (pseudo_quantize_tensor) on [out, in] weights in groups of
    `group` input columns: scale = (max - min) / 15, zero = clamp(-round(min / scale), 0, 15),
    q = clamp(round(w / scale) + zero, 0, 15). Returns q [out, in], zeros and scales [out, groups]."""
    out_features, in_features = w.shape
    g = w.reshape(out_features, in_features // group, group)
    lo, hi = g.min(axis=2), g.max(axis=2)
    scales = np.maximum(hi - lo, 1e-5).astype(np.float32) / 15
    scales = scales.astype(np.float16).astype(np.float32)  # AWQ stores f16 scales
    zeros = np.clip(-np.round(lo / scales), 0, 15)
    q = np.clip(np.round(g / scales[:, :, None]) + zeros[:, :, None], 0, 15)
    return q.reshape(out_features, in_features).astype(np.uint32), zeros.astype(np.uint32), scales


def pack_awq(columns: np.ndarray) -> np.ndarray:
    """AWQ's GEMM packing along the last axis: output column 8 * j + order[i] of word j in bits
    4 * i, order = 0 2 4 6 1 3 5 7 (AutoAWQ's WQLinear_GEMM.from_linear)."""
    order = [0, 2, 4, 6, 1, 3, 5, 7]
    rows, cols = columns.shape
    eights = columns.reshape(rows, cols // 8, 8)
    words = np.zeros((rows, cols // 8), dtype=np.uint32)
    for i, column in enumerate(order):
        words |= eights[:, :, column].astype(np.uint32) << np.uint32(4 * i)
    return words


def write_awq(source: Path, out: Path, group: int, skip: str) -> None:
    """The default model as AutoAWQ writes a 4-bit GEMM checkpoint (qweight [in, out / 8], qzeros
    [in / group, out / 8], f16 scales [in / group, out]), without its activation-aware scale search
    (plain round-to-nearest: the layout is what is under test). Modules whose names contain `skip`
    stay bf16 (`modules_to_not_convert`: the default model's down_proj rows, 688 wide, have no
    group size that AWQ's kernels or Baton's accept)."""
    def quantize(module, w):
        out_features, in_features = w.shape
        q, zeros, scales = awq_round_to_nearest(w, group)
        return {f"{module}.qweight": ("I32", [in_features, out_features // 8], pack_awq(q.T).tobytes()),
                f"{module}.qzeros": ("I32", [in_features // group, out_features // 8],
                                     pack_awq(zeros.T).tobytes()),
                f"{module}.scales": ("F16", [in_features // group, out_features],
                                     scales.T.astype(np.float16).tobytes())}
    rewrite_linears(source, out, quantize, {"quant_method": "awq", "bits": 4, "group_size": group,
                                            "zero_point": True, "version": "gemm",
                                            "modules_to_not_convert": [skip]}, skip)


def write_compressed_tensors_int4(source: Path, out: Path, group: int, skip: str) -> None:
    """llm-compressor's W4A16 scheme: symmetric int4 in groups, scale = max|w| / 7.5 in bf16,
    q = clamp(round(w / scale), -8, 7), packed eight to an I32 word as q + 8, low nibble first
    (pack_to_int32); `ignore` holds lm_head and the modules matching `skip`."""
    def quantize(module, w):
        shape = list(w.shape)
        w = w.reshape(shape[0], shape[1] // group, group)
        scale_bf16 = f32_to_bf16(np.abs(w).max(axis=2) / np.float32(7.5))
        scale = bf16_to_f32(scale_bf16).reshape(shape[0], shape[1] // group)
        q = np.clip(np.round(w / scale[:, :, None]), -8, 7).astype(np.int32) + 8
        eights = q.reshape(shape[0], shape[1] // 8, 8).astype(np.uint32)
        words = np.zeros((shape[0], shape[1] // 8), dtype=np.uint32)
        for i in range(8):
            words |= eights[:, :, i] << np.uint32(4 * i)
        return {f"{module}.weight_packed": ("I32", [shape[0], shape[1] // 8], words.tobytes()),
                f"{module}.weight_scale": ("BF16", [shape[0], shape[1] // group], scale_bf16),
                f"{module}.weight_shape": ("I64", [2], np.array(shape, dtype=np.int64).tobytes())}
    rewrite_linears(source, out, quantize, {
        "quant_method": "compressed-tensors", "format": "pack-quantized",
        "quantization_status": "compressed", "ignore": ["lm_head", f"re:.*{skip}$"],
        "config_groups": {"group_0": {
            "targets": ["Linear"],
            "weights": {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "group",
                        "group_size": group, "actorder": None}}}}, skip)


@pytest.mark.engine
def test_awq_and_compressed_tensors_int4_checkpoints_are_read(run_baton, tmp_path):
    """Detected from config.json; each within the int4 bound of bf16."""
    bf16 = eval_json(run_baton, "--dtype", "bf16")["perplexity"]
    write_awq(MODEL, tmp_path / "awq", 128, "down_proj")
    write_compressed_tensors_int4(MODEL, tmp_path / "w4a16", 128, "down_proj")
    for model in ("awq", "w4a16"):
        score = eval_json(run_baton, "--model", str(tmp_path / model))
        assert score["dtype"] == "i4", score
        assert score["perplexity"] / bf16 <= INT4_RATIO_LIMIT, (model, bf16, score)


@pytest.mark.engine
def test_the_cuda_emulated_device_scores_int8_as_the_cpu(run_baton):
    """The GPU backend's int8 products under the emulation: prompts through the GEMM (bf16 panels for
    cuBLAS, then the scales), decode steps through the GEMV kernel."""
    cpu = json.loads(run_baton("eval", "--window", "256", "--max-text-tokens", "1024", "--json",
                               "-q", "int8", timeout=300).stdout)
    emulated = json.loads(run_baton("eval", "--window", "256", "--max-text-tokens", "1024", "--json",
                                    "-q", "int8", "--device", "cuda-emulated", timeout=300).stdout)
    assert emulated["perplexity"] == pytest.approx(cpu["perplexity"], rel=1e-4)
    # Decode steps take the device's int8 GEMV (kernels/cuda/matmul_int8_gemv.cuh), emulated.
    args = ("generate", "--prompt", "And God said", "--max-tokens", "12", "-q", "int8")
    assert (run_baton(*args, "--device", "cuda-emulated", timeout=300).stdout
            == run_baton(*args, timeout=300).stdout)


@pytest.mark.engine
def test_the_cuda_emulated_device_runs_int4_as_the_cpu(run_baton):
    """Whole windows go through the device GEMM (bf16 panels for cuBLAS, the CPU's prefill-sized
    semantics): the same perplexity. Decode steps go through the device's int4 GEMV, which takes
    bf16 activations where the CPU quantizes them to int8 (kernels/include/baton/kernels/matmul.h):
    on this prompt the greedy tokens agree."""
    def score(*args):
        return json.loads(run_baton("eval", "--window", "256", "--max-text-tokens", "512", "--json",
                                    "-q", "int4", *args, timeout=300).stdout)["perplexity"]
    assert score("--device", "cuda-emulated") == pytest.approx(score(), rel=1e-4)
    args = ("generate", "--prompt", "And God said", "--max-tokens", "12", "-q", "int4")
    assert (run_baton(*args, "--device", "cuda-emulated", timeout=300).stdout
            == run_baton(*args, timeout=300).stdout)


@pytest.mark.engine
def test_the_cuda_emulated_device_runs_fp8_as_the_cpu(run_baton):
    """Whole windows go through the device GEMM (bf16 panels of scale * fp8, as the CPU's prefill
    sizes on AVX512_BF16 CPUs; elsewhere the CPU keeps f32 panels): the same perplexity within
    rounding. Decode steps go through the device's fp8 GEMV: the greedy tokens are the CPU's."""
    def score(*args):
        return json.loads(run_baton("eval", "--window", "256", "--max-text-tokens", "512", "--json",
                                    "-q", "fp8", *args, timeout=300).stdout)["perplexity"]
    assert score("--device", "cuda-emulated") == pytest.approx(score(), rel=1e-3)
    args = ("generate", "--prompt", "And God said", "--max-tokens", "12", "-q", "fp8")
    assert (run_baton(*args, "--device", "cuda-emulated", timeout=300).stdout
            == run_baton(*args, timeout=300).stdout)


@pytest.mark.engine
def test_unsupported_quantization_is_refused_in_one_line(run_baton):
    for args, message in [(("eval", "--quantization", "int3"), "--quantization"),
                          (("serve", "--quantization", "nvfp4"), "--quantization")]:
        proc = run_baton(*args, check=False, timeout=120)
        assert proc.returncode != 0 and message in proc.stderr, (args, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def complete(deployment, prompt: str, max_tokens: int) -> str:
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0}
    request = urllib.request.Request(f"http://127.0.0.1:{deployment.http_port}/v1/completions",
                                     data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())["choices"][0]["text"]


@pytest.mark.engine
@pytest.mark.parametrize("method", ["int8", "int4", "fp8"])
def test_a_served_quantized_deployment_answers_as_the_engine(baton_binary, run_baton, tmp_path,
                                                             method):
    """Prefill and decode workers both quantize at load; greedy tokens through the KV hand-off are
    the in-process engine's."""
    factory = DeploymentFactory(baton_binary, MODEL, tmp_path)
    try:
        deployment = factory.start(method, http=True, serve_args=("--quantization", method))
        prompt = "And God said, Let there be"
        served = complete(deployment, prompt, 16)
    finally:
        problems = factory.stop_all()
    assert not problems, "\n".join(problems)
    local = run_baton("generate", "--prompt", prompt, "--max-tokens", "16", "--temperature", "0",
                      "-q", method).stdout
    assert served and served in local, (served, local)
