// DeviceSpec: one device kind's peak rates and memory, and the links between devices — the numbers
// the roofline latency model and the KV-transfer and pipeline-stage terms are computed from.
//
// Known kinds: a100 (80 GB SXM), h100 (SXM), h200 (SXM) and cpu. Each number cites its source
// (the vendor's data sheet). On `cpu` a device is one core of this machine: its FLOP/s and memory
// bandwidth are estimates meant to be replaced by `baton plan profile`, which measures the engine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace baton::scheduler::planner {

struct LinkSpec {
  double bytes_per_s = 0;  // one direction, per device
  double latency_s = 0;    // per message
};

struct DeviceSpec {
  std::string name;            // "a100"
  std::string source;          // where the numbers come from
  double peak_flops = 0;       // dense bf16/f16 FLOP/s (tensor cores on GPUs)
  double mem_bytes_per_s = 0;  // device memory bandwidth
  uint64_t memory_bytes = 0;   // device memory
  // Fraction of memory_bytes the runtime may use for weights + KV (the rest: activations,
  // workspaces, the CUDA context), as vLLM's gpu_memory_utilization.
  double usable_memory_fraction = 0.9;
  // Achievable shares of the peaks, for the roofline (measured GEMM and copy rates are below peak).
  double flops_efficiency = 0.6;
  double mem_efficiency = 0.8;
  LinkSpec intra_node;  // between two devices of one node (NVLink; shared memory on cpu)
  LinkSpec inter_node;  // between nodes (InfiniBand / Ethernet)
  // Between a device and its host's memory (PCIe on GPUs; a memory copy on cpu): what swapping a
  // preempted sequence's KV out and back in costs.
  LinkSpec host_link;
};

// Sorted: "a100", "cpu", "h100", "h200".
std::vector<std::string> KnownDeviceNames();
// NotFound listing KnownDeviceNames() for anything else; names are matched ignoring case.
absl::StatusOr<DeviceSpec> KnownDevice(absl::string_view name);

}  // namespace baton::scheduler::planner
