// The analytical latency model: coefficients computed from a model's shape and a device's peak
// rates, for models and devices nobody profiled. With F = peak_flops * flops_efficiency and
// B = mem_bytes_per_s * mem_efficiency per device, each of tp devices holds 1/tp of the weights and
// of the heads, and a step pays the TP all-reduce: two per layer, a ring over the intra-node link
// sending 2 (tp-1)/tp of the hidden state per token, plus the link latency per collective. The
// result has the form of latency_coefficients.h, so the simulator does not care where its numbers
// came from. In milliseconds:
//   prefill (compute-bound): a = weight bytes / tp / B + all-reduce latencies (weights read once);
//            b = matmul FLOPs per token / tp / F + all-reduce bytes per token / link;
//            c = attention FLOPs per token pair / 2 (causal) / tp / F.
//   decode (memory-bound):   a = weight bytes / tp / B + all-reduce latencies;
//            b = max(KV bytes per context token / tp / B, attention FLOPs per pair / tp / F);
//            c = matmul FLOPs per token / tp / F + all-reduce bytes per token / link.
// A linear model of a max() is an approximation: each term takes the bound that holds in the regime
// it dominates (a: small batches and short prompts; b, c: long prompts, long contexts, large
// batches), and summing them overestimates near the crossover by at most the smaller bound.
// GQA with tp > num_kv_heads: when tp is a multiple of num_kv_heads each device holds one KV head
// (replicated tp / num_kv_heads times), and its replicated k/v projections and KV bytes count.
#pragma once

#include <vector>

#include "scheduler/planner/device_spec.h"
#include "scheduler/planner/latency_coefficients.h"
#include "scheduler/planner/model_shape.h"

namespace baton::scheduler::planner {

// Coefficients for each tp in `tps` that splits the model: tp >= 1 divides num_heads, and divides
// num_kv_heads or is a multiple of it; any other tp is left out (ForTp(tp) returns nullptr).
// Pre-condition: the device's rates and efficiencies are positive (the link's too when tp > 1).
LatencyCoefficients RooflineCoefficients(const ModelShape& model, const DeviceSpec& device,
                                         const std::vector<int>& tps);

}  // namespace baton::scheduler::planner
