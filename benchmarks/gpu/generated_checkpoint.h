// A Llama model directory with generated bf16 weights, written by the benchmark itself so that a GPU
// machine needs no checkpoint, no Python and no tokenizer: config.json (LlamaForCausalLM, untied
// lm_head, Llama-3's rope_theta) and one model.safetensors holding every tensor the loader reads
// (runtime/model/llama_weights.h), all BF16. The engine then loads it as any checkpoint: the bf16
// matmul weights are mapped zero-copy and uploaded to the device.
//
// Values: matmul weights uniform in +-sqrt(3 / fan_in) (unit-variance outputs), the embedding
// uniform in +-1, norms exactly 1; deterministic for a shape (a counter-based generator per chunk,
// so the chunks are generated in parallel). Throughput does not depend on the values; they are only
// kept finite and of sane scale through all layers, so no NaN reaches sampling.
//
// Size: 2 bytes per parameter (the Llama-3-8B shape: 16.1 GB). The directory is written as
// `<dir>.partial` and renamed, with a stamp file naming the shape, so a later run with the same
// shape reuses it and an interrupted write is never taken for a complete one.
#pragma once

#include <filesystem>

#include "absl/status/statusor.h"
#include "benchmarks/gpu/model_cost.h"
#include "kernels/common/thread_pool.h"

namespace baton::bench {

// Makes `dir` hold the generated model of `shape` (max_position_embeddings positions), reusing it
// when its stamp matches; otherwise (re)writes it. Returns true when it was written now.
// Errors: Internal for file-system failures, naming the path.
absl::StatusOr<bool> EnsureGeneratedCheckpoint(const std::filesystem::path& dir,
                                               const LlamaShape& shape,
                                               int max_position_embeddings, ThreadPool& pool);

}  // namespace baton::bench
