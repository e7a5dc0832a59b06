// KV hand-off throughput across TP/PP layouts against the same-layout hand-off, over shm and TCP
// loopback (Google Benchmark). The `small` model's KV shape (12 layers, 4 KV heads, head_dim 64,
// f32, block_size 16) and one 512-token request (32 blocks, 12 MiB of KV), prefill and decode
// block ids contiguous (one run) or scattered (random ids in pools of 128 blocks):
//   tp1_to_tp1  same layout: one whole-block pull (KvPullSpec without slabs), the baseline
//   tp2_to_tp1  one decode rank pulls heads 0-1 from prefill rank 0 and heads 2-3 from rank 1
//   tp1_to_tp2  each decode rank pulls its two heads of every layer from the one prefill rank
//   pp2_to_tp2  each decode rank pulls its two heads of layers 0-5 and 6-11 from the two stages
// One iteration is the whole hand-off: every decode rank's pull, one after the other on this
// thread (in a real instance the ranks pull concurrently, each in its own process). Bytes/s count
// the request's KV once (12 MiB per iteration, whatever the layout). The counter `ranges` is the
// number of contiguous byte ranges per hand-off (memcpys over shm; recvmsg iovecs over TCP).
//
//   ./bin/kv_reslice_bench [--benchmark_filter=tcp] [--benchmark_min_time=1]
//
// 2026-11-24, 2 vCPUs of an AMD EPYC (Zen 4, AVX-512) shared with other builds (load ~3), medians
// of 5 x 1 s, GB/s (1e9) for contiguous / scattered block ids:
//   layout       shm          tcp
//   tp1_to_tp1   17.5 / 18.7  2.19 / 2.53
//   tp2_to_tp1   13.0 / 17.9  2.13 / 4.05
//   tp1_to_tp2   17.1 / 14.2  1.56 / 1.59
//   pp2_to_tp2   16.2 / 16.8  1.60 / 1.38
// Run to run the figures move by up to +-50% on that machine, TCP most. Over shm the 1536 8-KiB
// memcpys of a cross-layout hand-off cost about what one 12-MiB memcpy does. Over TCP, perf shows
// the same profile with and without re-slicing (half the cycles in the kernel's loopback copies,
// copy_from_iter and copy_to_iter, then the TCP stack); the 1536 iovecs do not show. The lower
// tp1_to_tp2 and pp2_to_tp2 figures go with more connections per hand-off (2 and 4 pulls of 6 or
// 3 MiB, each with its connect, server thread and slow start), most likely, rather than with the
// slicing.
#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "runtime/kv_cache/kv_pool.h"
#include "runtime/transfer/kv_segment_names.h"
#include "runtime/transfer/kv_server.h"
#include "runtime/transfer/kv_slab_copy.h"
#include "runtime/transfer/kv_slab_mapping.h"
#include "runtime/transfer/shm_transport.h"
#include "runtime/transfer/tcp_transport.h"
#include "runtime/transfer/transport_factory.h"

namespace baton::runtime {
namespace {

constexpr KvPoolShape kModel{.num_layers = 12, .num_kv_heads = 4, .head_dim = 64, .block_size = 16};
constexpr int kNumTokens = 512;
constexpr int kRequestBlocks = kNumTokens / 16;
constexpr int kPoolBlocks = 4 * kRequestBlocks;

struct Layout {
  const char* name;
  ParallelLayout prefill;
  ParallelLayout decode;
  bool same_layout;  // pull whole blocks with a slab-less spec
};

const Layout kLayouts[] = {
    {"tp1_to_tp1", {.tp_size = 1, .pp_size = 1}, {.tp_size = 1, .pp_size = 1}, true},
    {"tp2_to_tp1", {.tp_size = 2, .pp_size = 1}, {.tp_size = 1, .pp_size = 1}, false},
    {"tp1_to_tp2", {.tp_size = 1, .pp_size = 1}, {.tp_size = 2, .pp_size = 1}, false},
    {"pp2_to_tp2", {.tp_size = 1, .pp_size = 2}, {.tp_size = 2, .pp_size = 1}, false},
};

// `count` block ids of a pool of kPoolBlocks: one run from a fixed start, or a random subset.
std::vector<BlockId> BlockList(std::mt19937& rng, bool scattered, int start) {
  std::vector<BlockId> ids(kPoolBlocks);
  std::iota(ids.begin(), ids.end(), 0);
  if (!scattered) return std::vector<BlockId>(ids.begin() + start, ids.begin() + start + kRequestBlocks);
  std::shuffle(ids.begin(), ids.end(), rng);
  return std::vector<BlockId>(ids.begin(), ids.begin() + kRequestBlocks);
}

// Both instances of one layout, with the request held by every prefill rank (random bytes, shm
// segment and KvServer each) and each decode rank's pull spec ready.
struct Handoff {
  std::vector<std::unique_ptr<KvPool>> prefill_pools;
  std::vector<std::unique_ptr<KvServer>> servers;  // after the pools: stopped before they go
  std::vector<KvRankSource> sources;
  std::vector<std::unique_ptr<KvPool>> decode_pools;
  std::vector<std::vector<BlockId>> dst_blocks;  // per decode rank
  std::vector<KvPullSpec> specs;                 // per decode rank
  std::vector<std::vector<KvSlab>> plan;         // per decode rank
  int64_t num_ranges = 0;

  static absl::StatusOr<std::unique_ptr<Handoff>> Create(const Layout& layout, bool scattered) {
    auto handoff = std::make_unique<Handoff>();
    std::mt19937 rng(1);
    absl::StatusOr<std::vector<std::vector<KvSlab>>> plan =
        MapKvSlabs(kModel, layout.prefill, layout.decode);
    if (!plan.ok()) return plan.status();
    handoff->plan = *std::move(plan);
    for (int r = 0; r < layout.prefill.num_ranks(); ++r) {
      absl::StatusOr<KvRankShard> shard = MakeKvRankShard(kModel, layout.prefill, r);
      if (!shard.ok()) return shard.status();
      absl::StatusOr<std::unique_ptr<KvPool>> pool = KvPool::Create(
          shard->pool_shape, kPoolBlocks, KvPoolOptions{.shm_name = NewKvSegmentName()});
      if (!pool.ok()) return pool.status();
      auto* words = reinterpret_cast<uint32_t*>((*pool)->BlockData(0));
      for (size_t i = 0; i < (*pool)->BlockBytes() * kPoolBlocks / 4; ++i) words[i] = rng();
      absl::StatusOr<std::unique_ptr<KvServer>> server = KvServer::Start(**pool, {});
      if (!server.ok()) return server.status();
      handoff->sources.push_back(KvRankSource{.source = LocalKvSource(**pool, (*server)->address()),
                                              .shape = shard->pool_shape,
                                              .src_blocks = BlockList(rng, scattered, 8)});
      handoff->prefill_pools.push_back(*std::move(pool));
      handoff->servers.push_back(*std::move(server));
    }
    for (int d = 0; d < layout.decode.num_ranks(); ++d) {
      absl::StatusOr<KvRankShard> shard = MakeKvRankShard(kModel, layout.decode, d);
      if (!shard.ok()) return shard.status();
      absl::StatusOr<std::unique_ptr<KvPool>> pool = KvPool::Create(shard->pool_shape, kPoolBlocks);
      if (!pool.ok()) return pool.status();
      std::memset((*pool)->BlockData(0), 0, (*pool)->BlockBytes() * kPoolBlocks);  // fault in
      handoff->dst_blocks.push_back(BlockList(rng, scattered, 64));
      KvPullSpec spec{.num_tokens = kNumTokens};
      if (layout.same_layout) {
        spec.source = handoff->sources[0].source;
        spec.shape = handoff->sources[0].shape;
        spec.src_blocks = handoff->sources[0].src_blocks;
      } else {
        spec.rank_sources = handoff->sources;
        spec.slabs = handoff->plan[d];
      }
      for (const KvSlab& slab : handoff->plan[d]) {
        handoff->num_ranges += static_cast<int64_t>(
            SlabByteRanges(handoff->sources[slab.src_rank_idx].shape, shard->pool_shape, slab,
                           handoff->sources[slab.src_rank_idx].src_blocks, handoff->dst_blocks[d])
                .size());
      }
      handoff->specs.push_back(std::move(spec));
      handoff->decode_pools.push_back(*std::move(pool));
    }
    return handoff;
  }

  absl::Status PullAll(KvTransport& transport) const {
    for (size_t d = 0; d < specs.size(); ++d) {
      absl::Status status = transport.Pull(specs[d], *decode_pools[d], dst_blocks[d],
                                           absl::Now() + absl::Seconds(30));
      if (!status.ok()) return status;
    }
    return absl::OkStatus();
  }

  // Every destination range holds its source's bytes.
  bool Landed() const {
    for (size_t d = 0; d < specs.size(); ++d) {
      for (const KvSlab& slab : plan[d]) {
        const KvRankSource& source = sources[slab.src_rank_idx];
        const KvPool& src = *prefill_pools[slab.src_rank_idx];
        const KvPool& dst = *decode_pools[d];
        for (const KvByteRange& range : SlabByteRanges(source.shape, dst.shape(), slab,
                                                       source.src_blocks, dst_blocks[d])) {
          if (std::memcmp(src.BlockData(0) + range.src_offset, dst.BlockData(0) + range.dst_offset,
                          range.num_bytes) != 0) {
            return false;
          }
        }
      }
    }
    return true;
  }
};

// The hand-off of the benchmark running now, kept across its repeated calls.
const Handoff* CachedHandoff(int layout_idx, bool scattered, benchmark::State& state) {
  static std::unique_ptr<Handoff> cached;
  static int cached_key = -1;
  const int key = layout_idx * 2 + (scattered ? 1 : 0);
  if (key != cached_key) {
    cached.reset();
    absl::StatusOr<std::unique_ptr<Handoff>> handoff =
        Handoff::Create(kLayouts[layout_idx], scattered);
    if (!handoff.ok()) {
      state.SkipWithError(handoff.status().ToString().c_str());
      cached_key = -1;
      return nullptr;
    }
    cached = *std::move(handoff);
    cached_key = key;
  }
  return cached.get();
}

void BM_Handoff(benchmark::State& state, int layout_idx, KvTransportKind kind, bool scattered) {
  const Handoff* handoff = CachedHandoff(layout_idx, scattered, state);
  if (handoff == nullptr) return;
  ShmTransport shm;
  TcpKvTransport tcp;
  KvTransport& transport = kind == KvTransportKind::kShm ? static_cast<KvTransport&>(shm) : tcp;
  for (auto _ : state) {
    if (absl::Status status = handoff->PullAll(transport); !status.ok()) {
      state.SkipWithError(status.ToString().c_str());
      return;
    }
  }
  if (!handoff->Landed()) {
    state.SkipWithError("a destination range does not hold its source's bytes");
    return;
  }
  const int64_t bytes = OwnedKvBytes(KvRankShard{.pool_shape = kModel}).per_token_bytes * kNumTokens;
  state.SetBytesProcessed(state.iterations() * bytes);
  state.counters["ranges"] = static_cast<double>(handoff->num_ranges);
}

bool RegisterAll() {
  for (int i = 0; i < static_cast<int>(std::size(kLayouts)); ++i) {
    for (const bool scattered : {false, true}) {
      for (const KvTransportKind kind : {KvTransportKind::kShm, KvTransportKind::kTcp}) {
        const std::string name = std::string("BM_Handoff/") + kLayouts[i].name + "/" +
                                 std::string(KvTransportKindName(kind)) +
                                 (scattered ? "/scattered" : "/contiguous");
        benchmark::RegisterBenchmark(name.c_str(), BM_Handoff, i, kind, scattered)
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
  return true;
}

const bool kRegistered = RegisterAll();

}  // namespace
}  // namespace baton::runtime

BENCHMARK_MAIN();
