// Per-rank resident weight memory of tp 1, 2 and 4 shards (pp 1), vocab-parallel and replicated:
// for each rank in turn, LoadLlamaWeights of its shard, then a read of every page of every weight
// (as a forward pass would), then the rank's weight bytes (num_owned_bytes + num_mapped_bytes) and
// the process's resident-set growth (/proc/self/statm) since before the load. Each rank loads in a
// child process of its own (fork), so that no rank's delta is hidden by pages the allocator kept
// from the one before.
//
//   ./shard_memory build/models/small      (scripts/make_checkpoint.py --shape small --out ...)
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <memory>
#include <vector>

#include "kernels/common/thread_pool.h"
#include "runtime/model/llama_weights.h"
#include "runtime/model/model_config.h"
#include "runtime/model/model_shard.h"

namespace baton::runtime {
namespace {

size_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages_total = 0, pages_resident = 0;
  statm >> pages_total >> pages_resident;
  return pages_resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// Reads one byte of every page of `weight`, so its mapped pages become resident.
size_t Touch(const Weight& weight) {
  const auto* bytes = static_cast<const volatile unsigned char*>(weight.data);
  size_t sum = 0;
  for (size_t i = 0; i < weight.num_bytes(); i += 4096) sum += bytes[i];
  return sum;
}

size_t TouchAll(const LlamaWeights& w) {
  size_t sum = Touch(w.embed_tokens) + Touch(w.final_norm) + Touch(w.lm_head);
  for (const LayerWeights& l : w.layers) {
    for (const Weight* weight :
         {&l.input_norm, &l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.q_bias, &l.k_bias,
          &l.v_bias, &l.post_attention_norm, &l.gate_proj, &l.up_proj, &l.down_proj}) {
      sum += Touch(*weight);
    }
  }
  return sum;
}

int Run(const char* model_dir) {
  absl::StatusOr<ModelConfig> config = LoadModelConfig(model_dir);
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", config.status().ToString().c_str());
    return 1;
  }
  ThreadPool pool(1);
  std::printf("%-28s %5s %14s %8s %14s %8s\n", "layout", "rank", "weight_bytes", "of_whole",
              "rss_delta", "of_whole");
  size_t whole_bytes = 0, whole_rss = 0;
  for (int tp_size : {1, 2, 4}) {
    for (bool vocab_parallel : {true, false}) {
      if (tp_size == 1 && !vocab_parallel) continue;
      const ParallelLayout layout{.tp_size = tp_size, .vocab_parallel = vocab_parallel};
      for (int rank = 0; rank < tp_size; ++rank) {
        absl::StatusOr<ModelShard> shard = MakeModelShard(*config, *ShardSpecOfRank(layout, rank));
        if (!shard.ok()) {
          std::fprintf(stderr, "%s\n", shard.status().ToString().c_str());
          return 1;
        }
        std::fflush(stdout);
        const pid_t child = fork();
        if (child < 0) return 1;
        if (child > 0) {
          int status = 0;
          waitpid(child, &status, 0);
          if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
          if (tp_size == 1) {  // the whole model's figures, for the ratios of the ranks after it
            std::ifstream whole("/tmp/shard_memory_whole." + std::to_string(getpid()));
            whole >> whole_bytes >> whole_rss;
          }
          continue;
        }
        const size_t rss_before = ResidentBytes();
        absl::StatusOr<std::unique_ptr<LlamaWeights>> weights =
            LoadLlamaWeights(model_dir, *config, DType::kF32, &pool, &*shard);
        if (!weights.ok()) {
          std::fprintf(stderr, "%s\n", weights.status().ToString().c_str());
          _exit(1);
        }
        volatile size_t sink = TouchAll(**weights);
        (void)sink;
        const size_t rss = ResidentBytes() - rss_before;
        const size_t bytes = (*weights)->num_owned_bytes + (*weights)->num_mapped_bytes;
        if (tp_size == 1) {
          whole_bytes = bytes, whole_rss = rss;
          std::ofstream("/tmp/shard_memory_whole." + std::to_string(getppid()))
              << bytes << " " << rss;
        }
        std::printf("%-28s %5d %14zu %8.3f %14zu %8.3f\n", LayoutString(layout).c_str(), rank,
                    bytes, static_cast<double>(bytes) / whole_bytes, rss,
                    static_cast<double>(rss) / whole_rss);
        std::fflush(stdout);
        _exit(0);
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace baton::runtime

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s MODEL_DIR\n", argv[0]);
    return 2;
  }
  return baton::runtime::Run(argv[1]);
}
