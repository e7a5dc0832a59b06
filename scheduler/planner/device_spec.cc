#include "scheduler/planner/device_spec.h"

#include <unistd.h>

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace baton::scheduler::planner {
namespace {

constexpr double kGB = 1e9;  // link and memory rates are decimal in data sheets
constexpr uint64_t kMiB = uint64_t{1} << 20;

// Per-message latencies: the order of magnitude of a small NCCL/MPI message, not measured here.
constexpr double kNvlinkLatencyS = 5e-6;
constexpr double kInfinibandLatencyS = 10e-6;
constexpr double kSharedMemoryLatencyS = 5e-6;
constexpr double kTcpLatencyS = 50e-6;
constexpr double kPcieLatencyS = 10e-6;  // a cudaMemcpyAsync between pinned host and device memory

// memory_bytes of the GPUs is what the driver reports as memory.total (nvidia-smi), the amount a
// usable fraction applies to, rather than the data sheet's rounded "80GB" / "141GB".
// NVLink's data-sheet figure is the sum of both directions; LinkSpec wants one direction.
// inter_node is one NIC per GPU, as in the DGX systems (8 GPUs, 8 compute NICs).

DeviceSpec A100() {
  return DeviceSpec{
      .name = "a100",
      .source =
          "NVIDIA A100 Tensor Core GPU data sheet (nvidia-a100-datasheet-us-nvidia-1758950-r4), "
          "A100 80GB SXM: BF16 tensor core 312 TFLOPS dense, HBM2e 2,039 GB/s, NVLink 600 GB/s "
          "(both directions), PCIe Gen4 x16 64 GB/s (both directions); 81920 MiB reported by the "
          "driver; DGX A100: one 200 Gb/s HDR InfiniBand NIC per GPU",
      .peak_flops = 312e12,
      .mem_bytes_per_s = 2039 * kGB,
      .memory_bytes = 81920 * kMiB,
      .intra_node = {.bytes_per_s = 300 * kGB, .latency_s = kNvlinkLatencyS},
      .inter_node = {.bytes_per_s = 25 * kGB, .latency_s = kInfinibandLatencyS},
      .host_link = {.bytes_per_s = 32 * kGB, .latency_s = kPcieLatencyS},
  };
}

DeviceSpec H100() {
  return DeviceSpec{
      .name = "h100",
      .source =
          "NVIDIA H100 Tensor Core GPU data sheet, H100 SXM: BF16 tensor core 1,979 TFLOPS with "
          "sparsity (989 dense), HBM3 3.35 TB/s, 80 GB, NVLink 900 GB/s (both directions), PCIe "
          "Gen5 x16 128 GB/s (both directions); 81559 MiB reported by the driver; DGX H100: one 400 Gb/s NDR InfiniBand NIC per GPU",
      .peak_flops = 989e12,
      .mem_bytes_per_s = 3350 * kGB,
      .memory_bytes = 81559 * kMiB,
      .intra_node = {.bytes_per_s = 450 * kGB, .latency_s = kNvlinkLatencyS},
      .inter_node = {.bytes_per_s = 50 * kGB, .latency_s = kInfinibandLatencyS},
      .host_link = {.bytes_per_s = 64 * kGB, .latency_s = kPcieLatencyS},
  };
}

DeviceSpec H200() {
  return DeviceSpec{
      .name = "h200",
      .source =
          "NVIDIA H200 Tensor Core GPU data sheet, H200 SXM: BF16 tensor core 1,979 TFLOPS with "
          "sparsity (989 dense), HBM3e 4.8 TB/s, 141 GB, NVLink 900 GB/s (both directions), PCIe "
          "Gen5 x16 128 GB/s (both directions); 143771 MiB reported by the driver; one 400 Gb/s NDR InfiniBand NIC per GPU as in DGX H200",
      .peak_flops = 989e12,
      .mem_bytes_per_s = 4800 * kGB,
      .memory_bytes = 143771 * kMiB,
      .intra_node = {.bytes_per_s = 450 * kGB, .latency_s = kNvlinkLatencyS},
      .inter_node = {.bytes_per_s = 50 * kGB, .latency_s = kInfinibandLatencyS},
      .host_link = {.bytes_per_s = 64 * kGB, .latency_s = kPcieLatencyS},
  };
}

// One core of this machine. Rough on purpose: `baton plan profile` measures the engine itself.
//   peak_flops: 2 FMA pipes x 8 f32 lanes x 2 FLOPs x 3 GHz = 9.6e10. That is a Zen 4 core
//     (its AVX-512 runs on 256-bit pipes) or an AVX2 core; a core with two 512-bit FMA pipes has
//     twice it, which only makes this estimate conservative.
//   mem_bytes_per_s: ~20 GB/s, what one core's streaming reads reach on a server (the socket's
//     bandwidth is shared between all cores, so a core's share is not much more either).
//   memory_bytes: this machine's RAM divided by its online cores, each core being one device.
//   links: workers on one machine exchange through shared memory (~10 GB/s); between machines
//     10 GbE (1.25 GB/s) over TCP; a swap to host memory is a copy at the shared-memory rate.
// The default efficiencies stand: the engine's matmul kernels are AVX-512/AVX2 FMA loops, and a
// core's copy rate is as far below its streaming peak as a GPU's.
DeviceSpec Cpu() {
  const long num_pages = sysconf(_SC_PHYS_PAGES);
  const long page_bytes = sysconf(_SC_PAGESIZE);
  const long num_cores = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  const uint64_t ram_bytes =
      num_pages > 0 && page_bytes > 0 ? static_cast<uint64_t>(num_pages) * page_bytes : 0;
  return DeviceSpec{
      .name = "cpu",
      .source = absl::StrCat(
          "rough estimate for one core of this machine (", num_cores,
          " cores): 9.6e10 f32 FLOP/s peak (2 x 8-lane FMA at 3 GHz), 20 GB/s memory, RAM / "
          "cores; shared memory 10 GB/s, 10 GbE between machines; `baton plan profile` measures "
          "the real rates"),
      .peak_flops = 9.6e10,
      .mem_bytes_per_s = 20 * kGB,
      .memory_bytes = ram_bytes / static_cast<uint64_t>(num_cores),
      .intra_node = {.bytes_per_s = 10 * kGB, .latency_s = kSharedMemoryLatencyS},
      .inter_node = {.bytes_per_s = 1.25 * kGB, .latency_s = kTcpLatencyS},
      .host_link = {.bytes_per_s = 10 * kGB, .latency_s = kSharedMemoryLatencyS},
  };
}

}  // namespace

std::vector<std::string> KnownDeviceNames() { return {"a100", "cpu", "h100", "h200"}; }

absl::StatusOr<DeviceSpec> KnownDevice(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  if (lower == "a100") return A100();
  if (lower == "h100") return H100();
  if (lower == "h200") return H200();
  if (lower == "cpu") return Cpu();
  return absl::NotFoundError(absl::StrCat(
      "unknown device '", name, "'; known devices: ", absl::StrJoin(KnownDeviceNames(), ", ")));
}

}  // namespace baton::scheduler::planner
