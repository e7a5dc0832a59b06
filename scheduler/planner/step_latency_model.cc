#include "scheduler/planner/step_latency_model.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace baton::scheduler::planner {

absl::Status StepLatencyModel::Check(Parallelism p) const {
  if (p.tp < 1 || p.pp < 1) return absl::FailedPreconditionError("tp and pp must be >= 1");
  if (coefficients_.ForTp(p.tp) == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("no latency coefficients for tp ", p.tp));
  }
  if (model_.num_heads % p.tp != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("tp ", p.tp, " does not divide the ", model_.num_heads, " attention heads"));
  }
  if (p.pp > model_.num_layers) {
    return absl::FailedPreconditionError(
        absl::StrCat("pp ", p.pp, " exceeds the ", model_.num_layers, " layers"));
  }
  if (KvCapacityTokens(p) < model_.max_context) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the weights (", model_.WeightBytes() >> 20, " MiB) leave too little room for KV on ",
        p.num_devices(), " device(s)"));
  }
  return absl::OkStatus();
}

double ForwardMs(const TpCoefficients& c, const MicroBatchShape& batch) {
  if (batch.empty()) return 0;
  if (batch.prompt_tokens == 0) return c.DecodeMs(batch.num_decode_seqs, batch.decode_context);
  double ms = c.PrefillMs(batch.prompt_tokens, batch.prompt_tokens_squared);
  if (batch.num_decode_seqs > 0) {
    // The decode form without its intercept: the weights are read once for the whole step.
    const DecodeCoefficients& d =
        c.decode_large.has_value() && batch.num_decode_seqs >= c.decode_large_batch_threshold
            ? *c.decode_large
            : c.decode;
    ms += std::max(0.0, d.b_ms * batch.decode_context + d.c_ms * batch.num_decode_seqs);
  }
  return ms;
}

double StepLatencyModel::StageMs(Parallelism p, const MicroBatchShape& batch,
                                 bool stages_cross_nodes) const {
  if (batch.empty()) return 0;
  double stage_ms = ForwardMs(*coefficients_.ForTp(p.tp), batch) / p.pp;
  if (p.pp > 1) {
    const LinkSpec& link = stages_cross_nodes ? device_.inter_node : device_.intra_node;
    const double tokens = batch.prompt_tokens + batch.num_decode_seqs;
    const double bytes = tokens * model_.hidden_size * model_.ActivationBytes();
    stage_ms += 1e3 * (link.latency_s + bytes / link.bytes_per_s);
  }
  return stage_ms;
}

double StepLatencyModel::KvTransferMs(int64_t num_tokens, Parallelism prefill, Parallelism decode,
                                      bool same_node) const {
  const LinkSpec& link = same_node ? device_.intra_node : device_.inter_node;
  const int num_links = std::min(prefill.num_devices(), decode.num_devices());
  const double bytes = static_cast<double>(num_tokens) * model_.KvBytesPerToken();
  return 1e3 * (link.latency_s + bytes / (num_links * link.bytes_per_s));
}

double StepLatencyModel::KvSwapMs(int64_t num_tokens, Parallelism p) const {
  if (num_tokens <= 0) return 0;
  const double bytes = static_cast<double>(num_tokens) * model_.KvBytesPerToken() / p.num_devices();
  return 1e3 * (device_.host_link.latency_s + bytes / device_.host_link.bytes_per_s);
}

int64_t StepLatencyModel::KvCapacityTokens(Parallelism p) const {
  const double usable = static_cast<double>(device_.memory_bytes) * device_.usable_memory_fraction *
                        p.num_devices();
  const double free_bytes = usable - static_cast<double>(model_.WeightBytes());
  if (free_bytes <= 0) return 0;
  return static_cast<int64_t>(free_bytes / model_.KvBytesPerToken());
}

}  // namespace baton::scheduler::planner
