// Shapes, devices and latency models for planner tests: small, hand-checkable numbers.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "scheduler/planner/simulator.h"
#include "scheduler/planner/step_latency_model.h"

namespace baton::scheduler::planner::testing {

// A Llama-shaped model of ~0.5 GB (bf16) with a 4096-token context.
inline ModelShape TestModel() {
  return ModelShape{.name = "test", .source = "planner_test_util.h", .num_layers = 8,
                    .hidden_size = 1024, .num_heads = 8, .num_kv_heads = 8, .head_dim = 128,
                    .intermediate_size = 4096, .vocab_size = 32000, .max_context = 4096};
}

// 16 GiB devices, links of 1 GB/s intra-node, 0.1 GB/s inter-node and 0.5 GB/s to the host, no
// latency.
inline DeviceSpec TestDevice() {
  return DeviceSpec{.name = "test", .peak_flops = 1e12, .mem_bytes_per_s = 1e11,
                    .memory_bytes = 16ull << 30, .usable_memory_fraction = 1.0,
                    .intra_node = {.bytes_per_s = 1e9}, .inter_node = {.bytes_per_s = 1e8},
                    .host_link = {.bytes_per_s = 5e8}};
}

// Coefficients for tp 1 (and tp 2 at half the cost): prefill a + b Σt, decode a + c batch.
inline LatencyCoefficients TestCoefficients(PrefillCoefficients prefill, DecodeCoefficients decode) {
  LatencyCoefficients c{.model = "test", .device = "test", .source = "test"};
  c.by_tp[1] = TpCoefficients{.prefill = prefill, .decode = decode};
  c.by_tp[2] = TpCoefficients{
      .prefill = {prefill.a_ms / 2, prefill.b_ms / 2, prefill.c_ms / 2},
      .decode = {decode.a_ms / 2, decode.b_ms / 2, decode.c_ms / 2}};
  return c;
}

// n requests of fixed lengths arriving as a Poisson process of `rate` (seeded, deterministic).
inline std::vector<SimRequest> PoissonRequests(int n, double rate, int input_len, int output_len,
                                               uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::vector<SimRequest> out;
  double t = 0;
  for (int i = 0; i < n; ++i) {
    out.push_back({.arrival_s = t, .input_len = input_len, .output_len = output_len});
    t += -std::log(1.0 - uniform(rng)) / rate;
  }
  return out;
}

}  // namespace baton::scheduler::planner::testing
