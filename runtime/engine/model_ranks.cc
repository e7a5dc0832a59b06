#include "runtime/engine/model_ranks.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <span>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "kernels/common/check.h"
#include "kernels/common/cpu_affinity.h"
#include "kernels/common/status_macros.h"
#include "kernels/common/thread_pool.h"
#include "runtime/backend/backend_registry.h"
#include "runtime/kv_cache/block_runs.h"
#include "runtime/model/llama_model.h"
#include "runtime/engine/checked_communicator.h"
#include "runtime/engine/spare_objects.h"
#include "runtime/parallel/instance_comms.h"

namespace baton::runtime {

struct ModelRanks::State {
  struct Rank {
    std::unique_ptr<ThreadPool> pool;
    std::unique_ptr<DeviceBackend> backend;  // over pool; outlives model
    // cuda-emulated: the rank's communicators, each buffer checked to be device memory first
    std::unique_ptr<CheckedCommunicator> checked_tp;
    std::unique_ptr<CheckedCommunicator> checked_pp;
    std::unique_ptr<LlamaModel> model;
    DeviceBuffer kv_storage;  // the pool's blocks on a device whose memory is not the host's
    std::unique_ptr<KvPool> kv_pool;
    std::unique_ptr<KvPool> swap_pool;  // host memory; null without swap space
    // The swap pool's blocks page-locked for the backend's copies; unpinned before the pool goes.
    struct Unpin {
      DeviceBackend* backend;
      void operator()(std::byte* host) const { (void)backend->UnpinHostMemory(host); }
    };
    std::unique_ptr<std::byte, Unpin> swap_pinned{nullptr, Unpin{nullptr}};
    StepOutput scratch;  // what a rank other than output_rank writes
  };

  // One submitted step.
  struct Job {
    uint64_t ticket = 0;
    std::span<const StepBatch> batches;
    const BlockCopies* swap_out = nullptr;  // nullptr: none
    const BlockCopies* swap_in = nullptr;
    std::vector<StepOutput> outputs;   // [micro-batch], written by output_rank
    std::vector<absl::Status> status;  // [rank]
    int num_done = 0;                  // ranks done with it; guarded by State::mu
  };

  // Runs the job's swaps and micro-batches on rank r; on error aborts the groups so no peer waits.
  void RunRank(int r, Job& job);
  // Copies blocks of rank r between its KV pool and its swap pool.
  absl::Status Swap(Rank& rank, const BlockCopies* copies, bool out);
  void RankThread(int r);
  void AbortGroups(absl::string_view reason);

  ModelConfig config;
  ParallelLayout layout;
  int num_blocks = 0;
  int num_swap_blocks = 0;
  int output_rank = 0;  // the last stage's tp rank 0: its outputs are returned
  std::vector<Rank> ranks;
  // The ranks' TP and PP groups, which the models point into. Destroyed before `ranks`: NCCL
  // communicators enqueue on the streams of the ranks' backends.
  std::unique_ptr<InstanceComms> comms;
  std::vector<std::thread> threads;  // one per rank when there are several; none for one rank
  std::vector<std::vector<int>> rank_cpus;  // [rank]: the CPUs its threads are pinned to, or empty
  bool failed = false;               // a step failed: the groups are aborted (engine thread)
  std::atomic<bool> aborted = false; // the same, seen by the rank threads: later jobs are skipped
  uint64_t next_ticket = 1;          // engine thread
  std::vector<std::unique_ptr<Job>> spare_jobs;  // waited for, kept for their buffers

  absl::Mutex mu;
  // Submitted and not yet waited for, in ticket order. Elements stay put while others come and go
  // (a rank thread holds a reference to its job outside mu).
  std::deque<std::unique_ptr<Job>> jobs ABSL_GUARDED_BY(mu);
  bool stopping ABSL_GUARDED_BY(mu) = false;
};

void ModelRanks::State::AbortGroups(absl::string_view reason) {
  aborted = true;
  comms->Abort(reason);
}

namespace {

// kv_cache_bytes 0: what every rank may take, gpu_memory_utilization of its device less what its
// weights (and the runtime) hold already, the smallest over the ranks.
absl::StatusOr<size_t> DeviceShareBudget(std::span<DeviceBackend* const> backends,
                                         const ModelRanksOptions& options) {
  if (!(options.gpu_memory_utilization > 0 && options.gpu_memory_utilization <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("ranks: gpu_memory_utilization ",
                                                   options.gpu_memory_utilization, " must be in (0, 1]"));
  }
  size_t budget = SIZE_MAX;
  for (size_t r = 0; r < backends.size(); ++r) {
    absl::StatusOr<DeviceMemoryInfo> memory = backends[r]->MemoryInfo();
    if (!memory.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ranks: a KV budget as a share of the device needs a GPU (", memory.status().message(), ")"));
    }
    const double allowed = options.gpu_memory_utilization * static_cast<double>(memory->total_bytes);
    const double in_use = static_cast<double>(memory->total_bytes - memory->free_bytes);
    if (allowed <= in_use) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "ranks: rank ", r, " has ", in_use / (1 << 20), " MiB in use after loading its weights, "
          "gpu_memory_utilization ", options.gpu_memory_utilization, " of ",
          memory->total_bytes >> 20, " MiB leaves no room for the KV cache"));
    }
    budget = std::min(budget, static_cast<size_t>(allowed - in_use));
  }
  return budget;
}

}  // namespace

absl::Status ModelRanks::State::Swap(Rank& rank, const BlockCopies* copies, bool out) {
  if (copies == nullptr) return absl::OkStatus();
  const size_t block_bytes = rank.kv_pool->BlockBytes();
  for (const BlockRun& run : CoalesceBlockRuns(copies->src, copies->dst)) {
    const size_t bytes = block_bytes * run.num_blocks;
    if (out) {
      RETURN_IF_ERROR(rank.backend->CopyToHost(rank.swap_pool->BlockData(run.dst_start),
                                               rank.kv_pool->BlockData(run.src_start), bytes));
    } else {
      RETURN_IF_ERROR(rank.backend->CopyToDevice(rank.kv_pool->BlockData(run.dst_start),
                                                 rank.swap_pool->BlockData(run.src_start), bytes));
    }
  }
  return absl::OkStatus();
}

void ModelRanks::State::RunRank(int r, Job& job) {
  Rank& rank = ranks[r];
  absl::Status& status = job.status[r];
  if (aborted) {
    status = absl::AbortedError(absl::StrCat("rank ", r, ": an earlier step failed"));
    return;
  }
  status = Swap(rank, job.swap_out, /*out=*/true);
  if (status.ok()) status = Swap(rank, job.swap_in, /*out=*/false);
  for (size_t m = 0; status.ok() && m < job.batches.size(); ++m) {
    StepOutput* out = r == output_rank ? &job.outputs[m] : &rank.scratch;
    status = rank.model->Forward(job.batches[m], *rank.kv_pool, out);
  }
  if (!status.ok()) {
    status = absl::Status(status.code(), absl::StrCat("rank ", r, ": ", status.message()));
    AbortGroups(status.message());
  }
}

void ModelRanks::State::RankThread(int r) {
  if (!rank_cpus[r].empty()) (void)PinThisThread(rank_cpus[r][0]);
  uint64_t next = 1;  // the ticket this rank runs next
  while (true) {
    Job* job = nullptr;
    {
      absl::MutexLock lock(&mu);
      // Submitted jobs run even once stopping: a peer may already be inside one, waiting for us.
      auto ready = [this, &next]() ABSL_SHARED_LOCKS_REQUIRED(mu) {
        return stopping || (!jobs.empty() && jobs.back()->ticket >= next);
      };
      mu.Await(absl::Condition(&ready));
      if (jobs.empty() || jobs.back()->ticket < next) return;  // stopping, nothing left
      job = jobs[next - jobs.front()->ticket].get();
    }
    RunRank(r, *job);
    ++next;
    absl::MutexLock lock(&mu);
    ++job->num_done;
  }
}

absl::StatusOr<std::unique_ptr<ModelRanks>> ModelRanks::Create(const ModelRanksOptions& options) {
  const ParallelLayout& layout = options.layout;
  // Checked before tp * pp is formed, so no size can overflow it.
  constexpr int kMaxRanks = 1024;
  if (layout.tp_size < 1 || layout.pp_size < 1 || layout.tp_size > kMaxRanks ||
      layout.pp_size > kMaxRanks || layout.tp_size * layout.pp_size > kMaxRanks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ranks: ", LayoutString(layout), " needs tp and pp sizes >= 1 and at most ", kMaxRanks,
        " ranks"));
  }
  const int num_ranks = layout.num_ranks();
  if (options.threads_per_rank < 1) {
    return absl::InvalidArgumentError("ranks: threads_per_rank must be >= 1");
  }
  if (!options.kv_shm_names.empty() && static_cast<int>(options.kv_shm_names.size()) != num_ranks) {
    return absl::InvalidArgumentError(absl::StrCat("ranks: ", options.kv_shm_names.size(),
                                                   " KV segment names for ", num_ranks, " ranks"));
  }
  auto state = std::make_unique<State>();
  state->layout = layout;
  state->ranks.resize(num_ranks);
  state->output_rank = (layout.pp_size - 1) * layout.tp_size;

  // Several ranks get cores of their own when the machine has enough; one rank is left to the OS.
  const std::vector<int> cpus = AllowedCpus();
  state->rank_cpus.resize(num_ranks);
  if (num_ranks > 1 && static_cast<int>(cpus.size()) >= num_ranks * options.threads_per_rank) {
    for (int r = 0; r < num_ranks; ++r) {
      const auto first = cpus.begin() + r * options.threads_per_rank;
      state->rank_cpus[r].assign(first, first + options.threads_per_rank);
    }
  }
  // The backends first: NCCL communicators enqueue on their streams.
  std::vector<void*> streams;
  for (int r = 0; r < num_ranks; ++r) {
    State::Rank& rank = state->ranks[r];
    rank.pool = std::make_unique<ThreadPool>(options.threads_per_rank, state->rank_cpus[r]);
    ASSIGN_OR_RETURN(rank.backend,
                     CreateBackend(BackendOptions{.device = options.device,
                                                  .pool = rank.pool.get(),
                                                  .device_index = options.first_device_index + r}));
    streams.push_back(rank.backend->native_stream());
  }
  // One group per stage for TP, one per tp rank for PP: in-process where buffers are host memory
  // (CPU, cuda-emulated), NCCL between GPUs.
  ASSIGN_OR_RETURN(state->comms,
                   InstanceComms::Create(InstanceCommsParams{
                       .kind = options.device == DeviceKind::kCuda ? CommKind::kNccl
                                                                   : CommKind::kInProcess,
                       .tp_size = layout.tp_size,
                       .pp_size = layout.pp_size,
                       .first_device = options.first_device_index,
                       .streams = std::move(streams),
                       .timeout = options.comm_timeout}));
  for (int r = 0; r < num_ranks; ++r) {
    State::Rank& rank = state->ranks[r];
    ASSIGN_OR_RETURN(const ShardSpec spec, ShardSpecOfRank(layout, r));
    RankComms comms = state->comms->rank(r);
    if (options.device == DeviceKind::kCudaEmulated) {
      // NCCL would take device memory only: the emulated device makes sure the model hands it so.
      if (comms.tp != nullptr) {
        rank.checked_tp = std::make_unique<CheckedCommunicator>(comms.tp, rank.backend.get());
        comms.tp = rank.checked_tp.get();
      }
      if (comms.pp != nullptr) {
        rank.checked_pp = std::make_unique<CheckedCommunicator>(comms.pp, rank.backend.get());
        comms.pp = rank.checked_pp.get();
      }
    }
    ASSIGN_OR_RETURN(rank.model,
                     LlamaModel::Load(options.model_dir, options.weight_dtype, rank.backend.get(),
                                      rank.pool.get(), spec,
                                      ModelComms{.tp = comms.tp, .pp = comms.pp}));
  }
  state->config = state->ranks[0].model->config();
  if (options.decode_graphs && num_ranks == 1) (void)state->ranks[0].model->EnableDecodeGraphs();

  // The same block count on every rank: what the smallest per-rank share of the budget holds.
  size_t rank_budget = options.kv_cache_bytes / num_ranks;
  if (options.kv_cache_bytes == 0) {
    std::vector<DeviceBackend*> backends;
    for (State::Rank& rank : state->ranks) backends.push_back(rank.backend.get());
    ASSIGN_OR_RETURN(rank_budget, DeviceShareBudget(backends, options));
  }
  int num_blocks = -1;
  for (int r = 0; r < num_ranks; ++r) {
    const int n = KvPool::NumBlocksForBudget(
        state->ranks[r].model->KvShape(options.block_size, options.kv_cache_dtype), rank_budget);
    num_blocks = num_blocks < 0 ? n : std::min(num_blocks, n);
  }
  if (num_blocks < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ranks: a KV budget of ", rank_budget, " bytes per rank over ", num_ranks,
        " ranks holds no block of ", options.block_size, " tokens"));
  }
  state->num_blocks = num_blocks;
  // The swap pools: as many blocks on every rank as the smallest per-rank share holds.
  for (int r = 0; options.swap_space_bytes > 0 && r < num_ranks; ++r) {
    const int n = KvPool::NumBlocksForBudget(
        state->ranks[r].model->KvShape(options.block_size, options.kv_cache_dtype),
        options.swap_space_bytes / num_ranks);
    state->num_swap_blocks = r == 0 ? n : std::min(state->num_swap_blocks, n);
  }
  if (options.swap_space_bytes > 0 && state->num_swap_blocks < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ranks: a swap space of ", options.swap_space_bytes, " bytes over ", num_ranks,
        " ranks holds no KV block of ", options.block_size, " tokens (",
        state->ranks[0].model->KvShape(options.block_size, options.kv_cache_dtype).BlockBytes(),
        " bytes on rank 0)"));
  }
  for (int r = 0; r < num_ranks; ++r) {
    State::Rank& rank = state->ranks[r];
    const KvPoolShape shape = rank.model->KvShape(options.block_size, options.kv_cache_dtype);
    KvPoolOptions pool_options;
    if (!options.kv_shm_names.empty()) pool_options.shm_name = options.kv_shm_names[r];
    if (!rank.backend->IsHostMemory()) {
      if (!options.kv_shm_names.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "ranks: a ", DeviceKindName(options.device),
            " KV pool lives in device memory and cannot be a shared-memory segment"));
      }
      rank.kv_storage = DeviceBuffer(rank.backend.get());
      RETURN_IF_ERROR(rank.kv_storage.Reserve(shape.BlockBytes() * num_blocks));
      pool_options.device_storage = rank.kv_storage.data<std::byte>();
      pool_options.device_ordinal = options.first_device_index + r;
    }
    ASSIGN_OR_RETURN(rank.kv_pool, KvPool::Create(shape, num_blocks, pool_options));
    if (state->num_swap_blocks > 0) {
      ASSIGN_OR_RETURN(rank.swap_pool, KvPool::Create(shape, state->num_swap_blocks));
      // Swapping moves whole runs of blocks each step; from pageable memory a GPU copies them
      // through a staging buffer at a fraction of the link's speed (the planner prices the link).
      std::byte* swap_blocks = rank.swap_pool->BlockData(0);
      if (absl::Status pinned = rank.backend->PinHostMemory(
              swap_blocks, shape.BlockBytes() * static_cast<size_t>(state->num_swap_blocks));
          !pinned.ok()) {
        return absl::Status(pinned.code(), absl::StrCat("ranks: the swap space: ", pinned.message(),
                                                        " (a smaller swap_space needs less)"));
      }
      rank.swap_pinned = {swap_blocks, State::Rank::Unpin{rank.backend.get()}};
    }
  }
  for (int r = 0; num_ranks > 1 && r < num_ranks; ++r) {
    state->threads.emplace_back([s = state.get(), r] { s->RankThread(r); });
  }
  return std::unique_ptr<ModelRanks>(new ModelRanks(std::move(state)));
}

ModelRanks::ModelRanks(std::unique_ptr<State> state) : state_(std::move(state)) {}

ModelRanks::~ModelRanks() {
  {
    absl::MutexLock lock(&state_->mu);
    state_->stopping = true;
  }
  for (std::thread& thread : state_->threads) thread.join();
}

const ModelConfig& ModelRanks::config() const { return state_->config; }
const ParallelLayout& ModelRanks::layout() const { return state_->layout; }
int ModelRanks::num_ranks() const { return static_cast<int>(state_->ranks.size()); }
int ModelRanks::num_blocks() const { return state_->num_blocks; }
int ModelRanks::num_swap_blocks() const { return state_->num_swap_blocks; }
const KvPool& ModelRanks::kv_pool(int rank_idx) const { return *state_->ranks[rank_idx].kv_pool; }

RankHoldings ModelRanks::holdings(int rank_idx) const {
  const State::Rank& rank = state_->ranks[rank_idx];
  const LlamaWeights& weights = rank.model->weights();
  return RankHoldings{
      .shard = rank.model->shard(),
      .weight_bytes = static_cast<int64_t>(weights.num_owned_bytes + weights.num_mapped_bytes),
      .kv_block_bytes = static_cast<int64_t>(rank.kv_pool->BlockBytes())};
}

uint64_t ModelRanks::Submit(std::span<const StepBatch> micro_batches, const BlockCopies* swap_out,
                            const BlockCopies* swap_in) {
  State& s = *state_;
  const int num_ranks = static_cast<int>(s.ranks.size());
  std::unique_ptr<State::Job> job = TakeSpare(s.spare_jobs);
  job->ticket = s.next_ticket++;
  job->batches = micro_batches;
  job->swap_out = swap_out;
  job->swap_in = swap_in;
  if (job->outputs.size() < micro_batches.size()) job->outputs.resize(micro_batches.size());
  job->status.assign(num_ranks, absl::OkStatus());
  job->num_done = 0;
  State::Job* raw = job.get();
  {
    absl::MutexLock lock(&s.mu);
    s.jobs.push_back(std::move(job));
  }
  if (num_ranks == 1) {
    s.RunRank(0, *raw);
    absl::MutexLock lock(&s.mu);
    raw->num_done = 1;
  }
  return raw->ticket;
}

absl::Status ModelRanks::Wait(uint64_t ticket, StepOutput* out) {
  State& s = *state_;
  const int num_ranks = static_cast<int>(s.ranks.size());
  std::unique_ptr<State::Job> job;
  {
    absl::MutexLock lock(&s.mu);
    BATON_CHECK(!s.jobs.empty() && s.jobs.front()->ticket == ticket);  // waited in order
    State::Job* front = s.jobs.front().get();
    auto done = [front, num_ranks]() ABSL_SHARED_LOCKS_REQUIRED(s.mu) {
      return front->num_done == num_ranks;
    };
    s.mu.Await(absl::Condition(&done));
    job = std::move(s.jobs.front());
    s.jobs.pop_front();
  }
  absl::Status status = absl::OkStatus();
  if (s.failed) {
    status = absl::FailedPreconditionError("ranks: an earlier step failed and aborted the instance");
  } else {
    // The first failure is the cause; the others are its Aborted echoes.
    for (const absl::Status& rank_status : job->status) {
      if (!rank_status.ok() && (status.ok() || absl::IsAborted(status))) status = rank_status;
    }
    if (!status.ok()) s.failed = true;
  }
  const std::span<const StepBatch> batches = job->batches;
  std::vector<StepOutput>& parts = job->outputs;
  if (status.ok() && batches.size() == 1) {
    std::swap(*out, parts[0]);
  } else if (status.ok()) {
    out->clear();
    for (size_t m = 0; m < batches.size(); ++m) {
      const int first_seq = static_cast<int>(out->token_ids.size());
      out->token_ids.insert(out->token_ids.end(), parts[m].token_ids.begin(),
                            parts[m].token_ids.end());
      out->logits.insert(out->logits.end(), parts[m].logits.begin(), parts[m].logits.end());
      for (PromptTokenLogprobs& scored : parts[m].prompt_logprobs) {
        scored.seq += first_seq;  // rows follow the micro-batches' sequences, in order
        out->prompt_logprobs.push_back(std::move(scored));
      }
    }
  }
  job->batches = {};
  job->swap_out = nullptr;
  job->swap_in = nullptr;
  s.spare_jobs.push_back(std::move(job));
  return status;
}

absl::Status ModelRanks::Forward(std::span<const StepBatch> micro_batches, StepOutput* out) {
  return Wait(Submit(micro_batches), out);
}

}  // namespace baton::runtime
