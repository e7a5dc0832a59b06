// KV migration throughput on one host: shm pull and TCP pull over loopback, against a plain memcpy
// of the same bytes measured in the same run. Default: the `small` model's KV shape (12 layers, 4
// KV heads, head_dim 64, f32, block_size 16) and a 2000-token request (125 blocks), with the blocks
// contiguous on both sides (one run) and scattered (random ids on both sides). Prints JSON.
//
//   baton_kv_transfer_bench [--num_tokens=2000] [--iterations=30] [--seed=1]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "runtime/kv_cache/kv_pool.h"
#include "runtime/kv_cache/block_runs.h"
#include "runtime/transfer/kv_segment_names.h"
#include "runtime/transfer/kv_server.h"
#include "runtime/transfer/shm_transport.h"
#include "runtime/transfer/tcp_transport.h"
#include "runtime/transfer/transport_factory.h"

namespace baton::runtime {
namespace {

struct Timing {
  double median_s = 0;
  double best_s = 0;
};

// Runs fn() `warmup` + `iterations` times; times the last `iterations`. Returns false if fn()
// fails.
template <typename Fn>
bool Measure(int iterations, Fn&& fn, Timing* timing) {
  constexpr int kWarmup = 3;
  std::vector<double> seconds;
  for (int i = 0; i < kWarmup + iterations; ++i) {
    const absl::Time start = absl::Now();
    if (!fn()) return false;
    if (i >= kWarmup) seconds.push_back(absl::ToDoubleSeconds(absl::Now() - start));
  }
  std::sort(seconds.begin(), seconds.end());
  timing->median_s = seconds[seconds.size() / 2];
  timing->best_s = seconds.front();
  return true;
}

bool SameBlocks(const KvPool& src, const std::vector<BlockId>& src_blocks, const KvPool& dst,
                const std::vector<BlockId>& dst_blocks) {
  for (size_t i = 0; i < src_blocks.size(); ++i) {
    if (std::memcmp(src.BlockData(src_blocks[i]), dst.BlockData(dst_blocks[i]), src.BlockBytes()) !=
        0) {
      return false;
    }
  }
  return true;
}

int Run(int num_tokens, int iterations, uint32_t seed) {
  const KvPoolShape shape{.num_layers = 12, .num_kv_heads = 4, .head_dim = 64, .block_size = 16};
  const int num_blocks = (num_tokens + shape.block_size - 1) / shape.block_size;
  const int pool_blocks = std::max(4 * num_blocks, 512);
  const size_t bytes = shape.BlockBytes() * num_blocks;

  auto src = KvPool::Create(shape, pool_blocks, KvPoolOptions{.shm_name = NewKvSegmentName()});
  auto dst = KvPool::Create(shape, pool_blocks);
  if (!src.ok() || !dst.ok()) {
    std::fprintf(stderr, "cannot create pools: %s %s\n", src.status().ToString().c_str(),
                 dst.status().ToString().c_str());
    return 1;
  }
  std::mt19937 rng(seed);
  {
    auto* words = reinterpret_cast<uint32_t*>((*src)->BlockData(0));
    for (size_t i = 0; i < shape.BlockBytes() * pool_blocks / 4; ++i) words[i] = rng();
    std::memset((*dst)->BlockData(0), 0, shape.BlockBytes() * pool_blocks);  // fault the pages in
  }
  auto server = KvServer::Start(**src, KvServerOptions{});
  if (!server.ok()) {
    std::fprintf(stderr, "cannot start the KV server: %s\n", server.status().ToString().c_str());
    return 1;
  }
  // The memcpy baseline: the same number of bytes between two private, pre-faulted buffers.
  std::vector<std::byte> copy_src(bytes), copy_dst(bytes);
  std::memcpy(copy_src.data(), (*src)->BlockData(0), bytes);

  ShmTransport shm;
  TcpKvTransport tcp;
  const KvSource source = LocalKvSource(**src, (*server)->address());

  struct Layout {
    std::string name;
    std::vector<BlockId> src_blocks;
    std::vector<BlockId> dst_blocks;
  };
  std::vector<Layout> layouts(2);
  layouts[0].name = "contiguous";
  layouts[1].name = "scattered";
  for (int i = 0; i < num_blocks; ++i) {
    layouts[0].src_blocks.push_back(pool_blocks / 8 + i);
    layouts[0].dst_blocks.push_back(pool_blocks / 2 + i);
  }
  std::vector<BlockId> ids(pool_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  layouts[1].src_blocks.assign(ids.begin(), ids.begin() + num_blocks);
  std::shuffle(ids.begin(), ids.end(), rng);
  layouts[1].dst_blocks.assign(ids.begin(), ids.begin() + num_blocks);

  nlohmann::json results = nlohmann::json::array();
  for (const Layout& layout : layouts) {
    const KvPullSpec spec{.source = source,
                          .shape = shape,
                          .src_blocks = layout.src_blocks,
                          .num_tokens = num_tokens};
    Timing memcpy_timing, shm_timing, tcp_timing;
    const bool memcpy_ok = Measure(
        iterations,
        [&] {
          std::memcpy(copy_dst.data(), copy_src.data(), bytes);
          return true;
        },
        &memcpy_timing);
    auto pull = [&](KvTransport& transport) {
      return [&] {
        const absl::Status status =
            transport.Pull(spec, **dst, layout.dst_blocks, absl::Now() + absl::Seconds(30));
        if (!status.ok()) std::fprintf(stderr, "%s\n", status.ToString().c_str());
        return status.ok();
      };
    };
    std::memset((*dst)->BlockData(0), 0, shape.BlockBytes() * pool_blocks);
    const bool shm_ok = Measure(iterations, pull(shm), &shm_timing) &&
                        SameBlocks(**src, layout.src_blocks, **dst, layout.dst_blocks);
    std::memset((*dst)->BlockData(0), 0, shape.BlockBytes() * pool_blocks);
    const bool tcp_ok = Measure(iterations, pull(tcp), &tcp_timing) &&
                        SameBlocks(**src, layout.src_blocks, **dst, layout.dst_blocks);
    if (!memcpy_ok || !shm_ok || !tcp_ok) {
      std::fprintf(stderr, "%s: a pull failed or moved the wrong bytes\n", layout.name.c_str());
      return 1;
    }
    auto gbps = [&](const Timing& t) { return bytes / t.median_s / 1e9; };
    auto best_gbps = [&](const Timing& t) { return bytes / t.best_s / 1e9; };
    results.push_back({
        {"layout", layout.name},
        {"num_runs", CoalesceBlockRuns(layout.src_blocks, layout.dst_blocks).size()},
        {"memcpy_gbps", gbps(memcpy_timing)},
        {"shm_gbps", gbps(shm_timing)},
        {"tcp_gbps", gbps(tcp_timing)},
        {"memcpy_best_gbps", best_gbps(memcpy_timing)},
        {"shm_best_gbps", best_gbps(shm_timing)},
        {"tcp_best_gbps", best_gbps(tcp_timing)},
        {"shm_over_memcpy", gbps(shm_timing) / gbps(memcpy_timing)},
        {"tcp_over_memcpy", gbps(tcp_timing) / gbps(memcpy_timing)},
        {"shm_median_ms", shm_timing.median_s * 1e3},
        {"tcp_median_ms", tcp_timing.median_s * 1e3},
        {"memcpy_median_ms", memcpy_timing.median_s * 1e3},
    });
  }
  const nlohmann::json report = {
      {"benchmark", "kv_transfer"},
      {"shape",
       {{"num_layers", shape.num_layers},
        {"num_kv_heads", shape.num_kv_heads},
        {"head_dim", shape.head_dim},
        {"block_size", shape.block_size},
        {"dtype", "f32"},
        {"block_bytes", shape.BlockBytes()}}},
      {"num_tokens", num_tokens},
      {"num_blocks", num_blocks},
      {"bytes", bytes},
      {"iterations", iterations},
      {"gbps_is", "1e9 bytes/s at the median iteration"},
      {"target_shm_over_memcpy", 0.5},
      {"results", results},
  };
  std::printf("%s\n", report.dump(2).c_str());
  return 0;
}

}  // namespace
}  // namespace baton::runtime

int main(int argc, char** argv) {
  CLI::App app{"KV-cache migration throughput: shm and TCP pulls vs memcpy"};
  int num_tokens = 2000;
  int iterations = 30;
  uint32_t seed = 1;
  app.add_option("--num_tokens", num_tokens, "tokens of the migrated request")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--iterations", iterations, "measured pulls per method")
      ->check(CLI::Range(1, 10000));
  app.add_option("--seed", seed, "seed of the scattered block ids and the data");
  CLI11_PARSE(app, argc, argv);
  return baton::runtime::Run(num_tokens, iterations, seed);
}
