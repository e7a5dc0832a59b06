#include "scheduler/planner/roofline.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_format.h"

namespace baton::scheduler::planner {
namespace {

constexpr double kMsPerS = 1e3;

// KV heads each of tp devices holds, or nullopt when tp cannot split the model: tp must divide
// the query heads, and either divide the KV heads or be a multiple of them (then each device holds
// one KV head, replicated tp / num_kv_heads times, as vLLM does for GQA with tp > num_kv_heads).
std::optional<int> KvHeadsPerDevice(const ModelShape& model, int tp) {
  if (tp < 1 || model.num_heads % tp != 0 || model.num_kv_heads < 1) return std::nullopt;
  if (model.num_kv_heads % tp == 0) return model.num_kv_heads / tp;
  if (tp % model.num_kv_heads == 0) return 1;
  return std::nullopt;
}

// One tp device's share of the model's work, replicated KV heads included.
struct PerDevice {
  double weight_bytes = 0;          // read once per step
  double matmul_flops = 0;          // per token
  double kv_bytes = 0;              // per context token
  double attention_pair_flops = 0;  // per (query token, context token) pair
};

PerDevice Split(const ModelShape& model, int tp, int kv_heads_per_device) {
  const double layers = model.num_layers;
  const double hidden = model.hidden_size;
  const double head_dim = model.head_dim;
  // KV heads held beyond the model's own: their k and v projections are replicated too.
  const double extra_kv_heads = static_cast<double>(kv_heads_per_device) * tp - model.num_kv_heads;
  const bool kv_bias = model.attention_bias || model.mlp == MlpKind::kPlain;
  const double extra_kv_weights = layers * extra_kv_heads * head_dim * 2 * hidden;
  const double extra_kv_biases = kv_bias ? layers * extra_kv_heads * head_dim * 2 : 0;
  const double extra_kv_params = extra_kv_weights + extra_kv_biases;
  return PerDevice{
      .weight_bytes =
          (static_cast<double>(model.NumParams()) + extra_kv_params) * model.bytes_per_param / tp,
      .matmul_flops = (model.MatmulFlopsPerToken() + 2 * extra_kv_weights) / tp,
      .kv_bytes = 2 * layers * kv_heads_per_device * head_dim * model.kv_bytes_per_value,
      .attention_pair_flops = model.AttentionFlopsPerTokenPair() / tp,
  };
}

}  // namespace

LatencyCoefficients RooflineCoefficients(const ModelShape& model, const DeviceSpec& device,
                                         const std::vector<int>& tps) {
  const double flops_per_s = device.peak_flops * device.flops_efficiency;
  const double bytes_per_s = device.mem_bytes_per_s * device.mem_efficiency;
  LatencyCoefficients out{
      .model = model.name,
      .device = device.name,
      .source = absl::StrFormat(
          "roofline: %s peak %.4g TFLOP/s, %.4g GB/s memory, %.4g GB/s / %.3g us intra-node link; "
          "efficiencies flops %.2f, memory %.2f",
          device.name, device.peak_flops / 1e12, device.mem_bytes_per_s / 1e9,
          device.intra_node.bytes_per_s / 1e9, device.intra_node.latency_s * 1e6,
          device.flops_efficiency, device.mem_efficiency),
  };
  for (int tp : tps) {
    const std::optional<int> kv_heads_per_device = KvHeadsPerDevice(model, tp);
    if (!kv_heads_per_device.has_value()) continue;
    const PerDevice share = Split(model, tp, *kv_heads_per_device);

    // TP all-reduce: two per layer (after attention's o projection and after the MLP), each a ring
    // sending 2 (tp-1)/tp of the hidden state per token, plus one link latency per collective
    // (NCCL's low-latency protocols keep a small all-reduce near one hop).
    double all_reduce_s_per_step = 0;
    double all_reduce_s_per_token = 0;
    if (tp > 1) {
      const double num_all_reduces = 2.0 * model.num_layers;
      all_reduce_s_per_step = num_all_reduces * device.intra_node.latency_s;
      all_reduce_s_per_token = num_all_reduces * model.hidden_size * model.ActivationBytes() * 2.0 *
                               (tp - 1) / tp / device.intra_node.bytes_per_s;
    }
    const double weights_s = share.weight_bytes / bytes_per_s;
    const double matmul_s_per_token = share.matmul_flops / flops_per_s;

    TpCoefficients coefficients;
    // Prefill is compute-bound from a few hundred tokens on; the weight read stays as the floor of
    // a short prompt (a sum where the hardware takes a max: at most that read too much).
    coefficients.prefill = PrefillCoefficients{
        .a_ms = (weights_s + all_reduce_s_per_step) * kMsPerS,
        .b_ms = (matmul_s_per_token + all_reduce_s_per_token) * kMsPerS,
        // Causal: each query token attends to the tokens before it, half the n² pairs.
        .c_ms = share.attention_pair_flops / 2 / flops_per_s * kMsPerS,
    };
    // Decode is memory-bound: every step reads the weights, every context token its K and V (the
    // larger of that read and its attention FLOPs, which a GQA group shares). Per sequence, the
    // matmul FLOPs of its one token, which take over from the weight read at large batches.
    coefficients.decode = DecodeCoefficients{
        .a_ms = (weights_s + all_reduce_s_per_step) * kMsPerS,
        .b_ms = std::max(share.kv_bytes / bytes_per_s, share.attention_pair_flops / flops_per_s) *
                kMsPerS,
        .c_ms = (matmul_s_per_token + all_reduce_s_per_token) * kMsPerS,
    };
    out.by_tp[tp] = coefficients;
  }
  return out;
}

}  // namespace baton::scheduler::planner
