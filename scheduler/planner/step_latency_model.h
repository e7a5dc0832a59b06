// StepLatencyModel: how long one engine step of an instance of a given (TP, PP) takes, how long a
// request's KV takes to move between two instances, and how much KV an instance holds — the
// planner's latency model. Built from LatencyCoefficients (profiled, roofline or a file), the
// model's shape and the device's spec.
//
// The terms:
//   - A micro-batch's time on one pipeline stage is the whole forward pass's time on tp devices
//     (the coefficients, all-reduce included) divided by pp, plus sending its activations
//     (tokens x hidden x bytes) to the next stage over the link between the stages (stage_link).
//   - A step mixing decode sequences and prompt tokens (chunked prefill) costs the prefill form
//     over its prompt tokens plus the decode form's per-context-token and per-sequence terms: the
//     decode intercept (reading the weights) is already in the prefill's. A prompt chunk at offset
//     o of q tokens counts q (q + 2 o) in Σ tokens², what its causal attention costs against the
//     chunk before it.
//   - KV transfer: KvBytesPerToken x tokens over min(prefill ranks, decode ranks) links in
//     parallel (each rank sends its shard of heads and layers), one link latency per transfer.
//   - KV swap: a preempted sequence's KV copied to host memory or back, each device its share
//     (KvBytesPerToken x tokens / devices) over its own host link, one link latency per copy.
//   - KV capacity: every device's usable memory minus its share of the weights, in tokens.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "scheduler/planner/device_spec.h"
#include "scheduler/planner/latency_coefficients.h"
#include "scheduler/planner/model_shape.h"

namespace baton::scheduler::planner {

struct Parallelism {
  int tp = 1;
  int pp = 1;
  int num_devices() const { return tp * pp; }
  bool operator==(const Parallelism&) const = default;
};

// The shape of one micro-batch as the latency model prices it.
struct MicroBatchShape {
  double prompt_tokens = 0;          // Σ q over prefill pieces
  double prompt_tokens_squared = 0;  // Σ q (q + 2 offset) over prefill pieces
  int num_decode_seqs = 0;
  double decode_context = 0;         // Σ context length over the decode sequences
  bool empty() const { return prompt_tokens == 0 && num_decode_seqs == 0; }
};

// The forward pass of one micro-batch on tp devices by the coefficients, all-reduces included,
// milliseconds: the prefill form over the prompt tokens, plus (chunked prefill) the decode form
// without its intercept over the decode sequences; the decode form alone without prompt tokens.
double ForwardMs(const TpCoefficients& coefficients, const MicroBatchShape& batch);

class StepLatencyModel {
 public:
  StepLatencyModel(LatencyCoefficients coefficients, ModelShape model, DeviceSpec device)
      : coefficients_(std::move(coefficients)), model_(std::move(model)), device_(std::move(device)) {}

  // OK when the coefficients cover p.tp, the heads split p.tp ways, pp <= num_layers, and the
  // weights leave room for KV on every device; otherwise FailedPrecondition saying which.
  absl::Status Check(Parallelism p) const;

  // One micro-batch on one stage, milliseconds. Pre-condition: Check(p) is OK.
  // stages_cross_nodes: the instance's stages talk over the inter-node link.
  double StageMs(Parallelism p, const MicroBatchShape& batch, bool stages_cross_nodes) const;
  // Moving num_tokens tokens of KV from a prefill instance to a decode instance.
  double KvTransferMs(int64_t num_tokens, Parallelism prefill, Parallelism decode, bool same_node) const;
  // Copying num_tokens tokens of an instance's KV to its swap space or back: what each of its
  // devices spends on it, milliseconds; 0 for no tokens.
  double KvSwapMs(int64_t num_tokens, Parallelism p) const;
  // Tokens of KV one instance holds; <= 0 when the weights do not fit.
  int64_t KvCapacityTokens(Parallelism p) const;

  const LatencyCoefficients& coefficients() const { return coefficients_; }
  const ModelShape& model() const { return model_; }
  const DeviceSpec& device() const { return device_; }

 private:
  LatencyCoefficients coefficients_;
  ModelShape model_;
  DeviceSpec device_;
};

}  // namespace baton::scheduler::planner
