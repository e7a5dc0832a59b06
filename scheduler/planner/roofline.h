// The analytical latency model: coefficients computed from a model's shape and a device's peak
// rates, for models and devices nobody profiled. Each step is bounded below by its compute
// (FLOPs / (peak_flops * flops_efficiency)) and by its memory traffic (bytes / (mem_bytes_per_s *
// mem_efficiency)); the roofline takes the larger, split per tp device, and adds the TP all-reduce
// (two per layer, a ring over the intra-node link: 2 (tp-1)/tp of the activations' bytes, plus the
// link latency per collective). The result has the form of latency_coefficients.h, so the
// simulator does not care where its numbers came from.
//   prefill: compute-bound: a = per-step fixed cost (weights read once), b = matmul FLOPs per token
//            + all-reduce bytes per token, c = attention FLOPs per token pair / 2 (causal).
//   decode:  memory-bound: a = weight bytes / tp read per step, b = KV bytes per context token / tp,
//            c = per-sequence compute and all-reduce.
// A linear fit of a max() is an approximation: RooflineCoefficients picks, per term, the bound
// that holds in the regime the term dominates (stated next to each in roofline.cc).
#pragma once

#include <vector>

#include "scheduler/planner/device_spec.h"
#include "scheduler/planner/latency_coefficients.h"
#include "scheduler/planner/model_shape.h"

namespace baton::scheduler::planner {

// Coefficients for each tp in `tps` (each >= 1) whose heads it divides.
LatencyCoefficients RooflineCoefficients(const ModelShape& model, const DeviceSpec& device,
                                         const std::vector<int>& tps);

}  // namespace baton::scheduler::planner
