#include "runtime/worker/worker.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "kernels/common/status_macros.h"
#include "runtime/transfer/kv_segment_names.h"
#include "runtime/transfer/kv_server.h"
#include "runtime/transfer/socket_io.h"
#include "runtime/transfer/transport_factory.h"
#include "runtime/worker/worker_draining.h"

namespace baton::runtime {
namespace {

int64_t NowUs() { return absl::ToUnixMicros(absl::Now()); }

// How often a blocked call looks at its is_cancelled probe.
constexpr absl::Duration kPollInterval = absl::Milliseconds(20);

// The KV admission queue's view of the engine. Engine thread only.
class EngineKvAdmitter final : public KvAdmitter {
 public:
  explicit EngineKvAdmitter(Engine& engine) : engine_(engine) {}

  absl::Status Validate(const PrefilledRequest& request) const override {
    return engine_.ValidatePrefilled(request.prompt_token_ids, request.generated_token_ids,
                                     request.params);
  }
  bool CanAdmit(const PrefilledRequest& request) const override {
    const int num_kv_tokens = NumPrefilledKvTokens(request.prompt_token_ids, request.generated_token_ids);
    // Requests paused because their clients stopped reading give their KV up before this one waits.
    engine_.ReleasePausedKvFor(num_kv_tokens);
    return engine_.CanAdmitPrefilled(request.prompt_token_ids, request.generated_token_ids);
  }
  absl::StatusOr<KvAdmission> Admit(PrefilledRequest request) override {
    ASSIGN_OR_RETURN(SeqId seq_id,
                     engine_.AdmitPrefilled(std::move(request.prompt_token_ids),
                                            std::move(request.generated_token_ids),
                                            std::move(request.params)));
    absl::StatusOr<std::vector<BlockId>> blocks = engine_.BlocksOf(seq_id);
    if (!blocks.ok()) {
      (void)engine_.Cancel(seq_id);
      return blocks.status();
    }
    KvAdmission admission{.seq_id = seq_id, .blocks = *std::move(blocks),
                          .num_cached_blocks = *engine_.NumCachedBlocksOf(seq_id)};
    for (int r = 0; r < engine_.ranks().num_ranks(); ++r) {
      admission.pools.push_back(&engine_.ranks().kv_pool(r));
    }
    return admission;
  }

 private:
  Engine& engine_;
};

// The kind of KV link a device's pools migrate over ("" for host pools: shm and TCP).
std::string_view KvLinkKind(DeviceKind device) {
  switch (device) {
    case DeviceKind::kCpu:
      return "";
    case DeviceKind::kCuda:
      return "nccl";
    case DeviceKind::kCudaEmulated:
      return "nccl-emulated";
  }
  return "";
}

}  // namespace

absl::StatusOr<std::unique_ptr<Worker>> Worker::Create(const WorkerOptions& options) {
  EngineConfig engine_config = options.engine;
  const std::string_view link_kind = KvLinkKind(engine_config.device);
  std::unique_ptr<KvLinkFactory> link_factory;
  if (options.role == WorkerRole::kPrefill && !link_kind.empty()) {
    ASSIGN_OR_RETURN(link_factory, MakeKvLinkFactory(link_kind, options.host, options.advertise_host));
  }
  if (options.role == WorkerRole::kPrefill && link_kind.empty()) {
    // Every rank's pool in a segment of its own, so that decode workers on this host map each one.
    engine_config.kv_shm_names.clear();
    for (int r = 0; r < engine_config.parallel.num_ranks(); ++r) {
      engine_config.kv_shm_names.push_back(NewKvSegmentName());
    }
  }
  if (options.role == WorkerRole::kDecode) engine_config.max_num_batched_tokens = 1;
  ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(engine_config));
  // The pools live as long as the engine, which the worker's loop owns; their const accessors may
  // be read from any thread.
  const ModelRanks& ranks = engine->ranks();
  std::unique_ptr<StepTraceWriter> step_trace;
  if (!options.step_trace_path.empty()) {
    ASSIGN_OR_RETURN(step_trace, StepTraceWriter::Create(
                                     options.step_trace_path,
                                     StepTraceHeader{.role = std::string(WorkerRoleName(options.role)),
                                                     .instance = options.instance_idx,
                                                     .tp = ranks.layout().tp_size,
                                                     .pp = ranks.layout().pp_size,
                                                     .device = std::string(DeviceKindName(
                                                         options.engine.device))}));
    engine->SetStepObserver([writer = step_trace.get()](const StepRecord& record) { writer->Append(record); });
  }
  auto worker = std::unique_ptr<Worker>(new Worker(options, std::move(engine)));
  worker->step_trace_ = std::move(step_trace);
  worker->kv_link_factory_ = std::move(link_factory);
  if (options.role == WorkerRole::kDecode) {
    ASSIGN_OR_RETURN(worker->transport_, MakeKvTransport(link_kind, options.host, options.deployment_secret,
                                                            options.kv_link_pool_size));
  }
  if (options.role == WorkerRole::kPrefill) {
    for (int r = 0; r < ranks.num_ranks(); ++r) {
      // An explicit kv_port gives rank r the port kv_port + r, so a deployment can open a range.
      const int port = options.kv_port != 0 ? options.kv_port + r : 0;
      ASSIGN_OR_RETURN(std::unique_ptr<KvServer> server,
                       KvServer::Start(ranks.kv_pool(r),
                                       KvServerOptions{.host = options.host,
                                                       .advertise_host = options.advertise_host,
                                                       .port = port,
                                                       .link_factory = worker->kv_link_factory_.get(),
                                                       .secret = options.deployment_secret,
                                                       .grants = &worker->kv_grants_}));
      worker->kv_sources_.push_back(
          LocalKvSource(ranks.kv_pool(r), server->address(), std::string(link_kind)));
      worker->kv_servers_.push_back(std::move(server));
    }
    Worker* raw = worker.get();
    worker->loop_->AddHook([raw](Engine& engine) { raw->ExpireLeases(engine); });
  }
  if (options.role == WorkerRole::kDecode) {
    Worker* raw = worker.get();
    worker->loop_->AddHook([raw](Engine& engine) { raw->AdmitWaitingForKv(engine); });
  }
  return worker;
}

Worker::Worker(const WorkerOptions& options, std::unique_ptr<Engine> engine)
    : options_(options),
      model_config_(engine->model_config()),
      max_model_len_(engine->max_model_len()),
      num_kv_blocks_(engine->allocator().num_blocks()),
      layout_(engine->ranks().layout()),
      prefix_cache_salt_(engine->prefix_caching() ? engine->prefix_cache_salt() : ""),
      kv_model_shape_(KvPoolShape{.num_layers = model_config_.num_layers,
                                  .num_kv_heads = model_config_.num_kv_heads,
                                  .head_dim = model_config_.head_dim,
                                  .block_size = options.engine.block_size,
                                  .dtype = options.engine.kv_cache_dtype}) {
  for (int r = 0; r < engine->ranks().num_ranks(); ++r) {
    rank_holdings_.push_back(engine->ranks().holdings(r));
  }
  loop_ = std::make_unique<EngineLoop>(std::move(engine));
}

Worker::~Worker() {
  // The KV servers read the engine's pools: stop them before the engine goes.
  for (std::unique_ptr<KvServer>& server : kv_servers_) server->Stop();
  loop_.reset();
}

void Worker::ExpireLeases(Engine& engine) {
  for (const WorkerRequest& request : requests_.TakeExpiredLeases(absl::Now())) {
    ReleaseHeldKv(engine, *request.seq_id, request.kv_grant);
  }
}

void Worker::Abandon(const std::string& request_id) {
  std::optional<WorkerRequest> request = requests_.Remove(request_id);
  if (!request || !request->seq_id) return;
  const SeqId seq_id = *request->seq_id;
  loop_->Post([this, seq_id](Engine& engine) {
    (void)engine.Cancel(seq_id);
    loop_->Unsubscribe(seq_id);
  });
}

absl::StatusOr<TokenOutput> Worker::NextOutput(TokenChannel& channel, absl::Time deadline,
                                               const std::function<bool()>& is_cancelled) {
  while (true) {
    const absl::Time now = absl::Now();
    if (now >= deadline) return absl::DeadlineExceededError("deadline passed while generating");
    if (is_cancelled()) return absl::CancelledError("cancelled by the caller");
    absl::StatusOr<TokenOutput> item;
    bool resume = false;
    if (!channel.Pop(std::min(deadline, now + kPollInterval), &item, &resume)) continue;
    if (item.ok() && item->finish_reason == FinishReason::kCancelled) {
      return absl::CancelledError("cancelled");
    }
    if (resume && item.ok()) {  // the caller caught up with a paused request (Decode's sink)
      loop_->Post([seq_id = item->seq_id](Engine& engine) { (void)engine.Resume(seq_id); });
    }
    return item;
  }
}

absl::StatusOr<PrefillResult> Worker::Prefill(PrefillCall call) {
  if (options_.role != WorkerRole::kPrefill) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker ", WorkerRoleName(options_.role), " ", options_.instance_idx,
                     " does not prefill for hand-off"));
  }
  if (draining_) return WorkerDrainingError();
  // A new grammar is compiled here, on the caller's thread, not by the engine loop (where every
  // running sequence would wait for it); an error is the engine's to report, as before.
  if (call.params.constraint.active()) loop_->PrecompileConstraint(call.params.constraint).IgnoreError();
  const std::string& request_id = call.request_id;
  ASSIGN_OR_RETURN(WorkerRequest request, requests_.Add(request_id));
  std::shared_ptr<TokenChannel> channel = request.channel;
  call.params.hold_kv_after_prefill = true;
  // The prompt and any tokens a replayed request already generated: all of them are prefilled.
  const int64_t num_context_tokens =
      static_cast<int64_t>(call.prompt_token_ids.size() + call.generated_token_ids.size());
  absl::StatusOr<SeqId> seq_id = loop_->Call([&](Engine& engine) -> absl::StatusOr<SeqId> {
    absl::StatusOr<SeqId> id = engine.AddRequest(std::move(call.prompt_token_ids), call.params,
                                                 std::move(call.generated_token_ids));
    if (id.ok()) loop_->Subscribe(*id, [channel](absl::StatusOr<TokenOutput> out) { channel->Push(std::move(out)); });
    return id;
  });
  if (!seq_id.ok()) {
    requests_.Remove(request_id);
    return seq_id.status();
  }
  requests_.SetSeqId(request_id, *seq_id);
  prefill_tokens_outstanding_ += num_context_tokens;
  absl::StatusOr<TokenOutput> first = NextOutput(*channel, call.deadline, call.is_cancelled);
  prefill_tokens_outstanding_ -= num_context_tokens;
  if (!first.ok()) {
    Abandon(request_id);
    return first.status();
  }
  PrefillResult result{.first_token = std::move(*first), .prefill_end_us = NowUs()};
  if (result.first_token.finish_reason != FinishReason::kNone) {
    requests_.Remove(request_id);  // the engine already freed everything
    return result;
  }
  // Held: describe the blocks, and start the lease.
  const SeqId id = *seq_id;
  absl::StatusOr<Engine::HeldKv> held =
      loop_->Call([id](Engine& engine) { return engine.GetHeldKv(id); });
  if (!held.ok()) {
    Abandon(request_id);
    return held.status();
  }
  absl::StatusOr<std::string> grant = kv_grants_.Grant(held->blocks);
  if (!grant.ok()) {
    Abandon(request_id);
    return grant.status();
  }
  // A call cancelled meanwhile (Cancel, Release, or its caller gone: the result would be lost) has
  // nobody to release the KV: free it now rather than when the lease passes.
  if (call.is_cancelled() ||
      !requests_.SetLease(request_id, absl::Now() + call.kv_lease, *grant)) {
    requests_.Remove(request_id);
    FreeHeldKv(id, *grant);
    return absl::CancelledError("cancelled after the prefill");
  }
  result.kv = KvHandoff{.model_shape = kv_model_shape_,
                        .layout = layout_,
                        .rank_sources = kv_sources_,
                        .blocks = std::move(held->blocks),
                        .num_tokens = held->num_tokens,
                        .kv_grant = *std::move(grant)};
  return result;
}

absl::Status Worker::Release(const std::string& request_id) {
  if (options_.role != WorkerRole::kPrefill) {
    return absl::FailedPreconditionError("only a prefill worker holds KV for a hand-off");
  }
  if (!Cancel(request_id)) {
    return absl::NotFoundError(absl::StrCat("request ", request_id, " holds no KV here"));
  }
  return absl::OkStatus();
}

void Worker::FreeHeldKv(SeqId seq_id, const std::string& kv_grant) {
  loop_->Call([&](Engine& engine) { ReleaseHeldKv(engine, seq_id, kv_grant); });
}

void Worker::ReleaseHeldKv(Engine& engine, SeqId seq_id, const std::string& kv_grant) {
  kv_grants_.Revoke(kv_grant);  // no pull reads the blocks past here
  (void)engine.ReleaseKv(seq_id);
  loop_->Unsubscribe(seq_id);
}

void Worker::AdmitWaitingForKv(Engine& engine) {
  EngineKvAdmitter admitter(engine);
  kv_admissions_.AdmitReady(admitter);
  num_waiting_for_kv_.store(kv_admissions_.size(), std::memory_order_relaxed);
}

absl::StatusOr<KvAdmission> Worker::AwaitKvRoom(DecodeCall& call, const WorkerRequest& request) {
  auto ticket = std::make_shared<KvAdmissionTicket>(
      PrefilledRequest{.prompt_token_ids = std::move(call.prompt_token_ids),
                       .generated_token_ids = std::move(call.generated_token_ids),
                       .params = std::move(call.params)});
  loop_->Post([this, ticket](Engine& engine) {
    kv_admissions_.Enqueue(ticket, EngineKvAdmitter(engine));
    num_waiting_for_kv_.store(kv_admissions_.size(), std::memory_order_relaxed);
  });
  const std::shared_ptr<std::atomic<bool>> cancelled = request.cancelled;
  return ticket->Wait(KvAdmissionTicket::WaitParams{
      .deadline = call.deadline,
      .is_cancelled = [&call, cancelled] { return call.is_cancelled() || cancelled->load(); },
      .poll_interval = kPollInterval,
      .free_admitted =
          [this](SeqId seq_id) {
            loop_->Post([seq_id](Engine& engine) { (void)engine.Cancel(seq_id); });
          },
  });
}

absl::Status Worker::PullAllRanks(const std::vector<KvPullSpec>& specs, const std::vector<const KvPool*>& pools,
                                  const std::vector<BlockId>& dst_blocks, absl::Time deadline,
                                  const std::function<bool()>& is_cancelled) {
  if (specs.size() != pools.size()) {
    return absl::InternalError(absl::StrCat("KV pull: ", specs.size(), " rank pulls planned for ",
                                            pools.size(), " rank pools"));
  }
  const UniqueFd cancel(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!cancel.valid()) return absl::InternalError("KV pull: cannot create an eventfd");
  const KvPullWait wait(deadline, cancel.get());
  std::vector<absl::Status> statuses(specs.size());
  std::atomic<size_t> num_running = specs.size();
  absl::Notification all_done;
  auto pull = [&](size_t r) {
    statuses[r] = transport_->Pull(specs[r], *pools[r], dst_blocks, wait);
    if (num_running.fetch_sub(1) == 1) all_done.Notify();
  };
  // Every rank on a thread of its own, so the ranks' copies overlap, while this one watches the
  // request: once it is cancelled (the caller gone, or Cancel), the cancel fd stops every pull's
  // socket waits — a source that froze mid-pull holds no blocks here beyond kPollInterval. Every
  // pull ends by the deadline (KvTransport::Pull) in any case, so the joins do too.
  std::vector<std::thread> threads;
  for (size_t r = 0; r < specs.size(); ++r) threads.emplace_back(pull, r);
  while (!all_done.WaitForNotificationWithTimeout(kPollInterval)) {
    if (!is_cancelled()) continue;
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t written = write(cancel.get(), &one, sizeof(one));
    break;
  }
  for (std::thread& thread : threads) thread.join();
  for (size_t r = 0; r < statuses.size(); ++r) {
    if (statuses[r].ok()) continue;
    if (specs.size() == 1) return statuses[r];
    return absl::Status(statuses[r].code(),
                        absl::StrCat("decode rank ", r, ": ", statuses[r].message()));
  }
  return absl::OkStatus();
}

absl::Status Worker::StartHandedOff(DecodeCall& call, const WorkerRequest& request,
                                    const TokenSink& sink) {
  // Plan first: a hand-off this instance cannot take fails at once, without waiting for room.
  absl::StatusOr<std::vector<KvPullSpec>> specs = PlanKvPulls(*call.kv, kv_model_shape_, layout_);
  const int num_kv_tokens = NumPrefilledKvTokens(call.prompt_token_ids, call.generated_token_ids);
  if (specs.ok() && call.kv->num_tokens != num_kv_tokens) {
    specs = absl::InvalidArgumentError(absl::StrCat(
        "the KV source holds ", call.kv->num_tokens, " tokens; ", call.prompt_token_ids.size(),
        " prompt + ", call.generated_token_ids.size(), " generated tokens need ", num_kv_tokens));
  }
  if (!specs.ok()) {
    requests_.Remove(call.request_id);
    return specs.status();
  }
  absl::StatusOr<KvAdmission> admitted = AwaitKvRoom(call, request);
  if (!admitted.ok()) {
    requests_.Remove(call.request_id);
    return admitted.status();
  }
  const SeqId seq_id = admitted->seq_id;
  requests_.SetSeqId(call.request_id, seq_id);
  // The blocks are allocated to a sequence the engine does not schedule yet: the transfer is their
  // only writer.
  KvTransferReport report{.start_us = NowUs()};
  const std::shared_ptr<std::atomic<bool>> cancelled = request.cancelled;
  // The blocks this instance's prefix cache supplied are not pulled again (a follow-up turn pulls
  // its new blocks, not the whole history).
  const int num_cached = admitted->num_cached_blocks;
  const std::vector<BlockId> dst_blocks(admitted->blocks.begin() + num_cached, admitted->blocks.end());
  if (num_cached > 0) specs = PlanKvPulls(DropLeadingBlocks(*call.kv, num_cached), kv_model_shape_, layout_);
  absl::Status pulled = specs.status();
  if (pulled.ok() && !dst_blocks.empty()) {
    pulled = PullAllRanks(*specs, admitted->pools, dst_blocks, call.deadline,
                          [&call, cancelled] { return call.is_cancelled() || cancelled->load(); });
  }
  report.end_us = NowUs();
  report.num_cached_tokens = num_cached * kv_model_shape_.block_size;
  // What the ranks pulled: each its own layers x KV heads of every block not cached.
  for (const KvPool* pool : admitted->pools) {
    report.num_bytes += static_cast<int64_t>(dst_blocks.size() * pool->BlockBytes());
  }
  if (!pulled.ok()) {
    Abandon(call.request_id);
    // The source is gone or unreachable, or no longer holds the KV for this request (its lease
    // passed: the grant is revoked), not this instance's fault: ABORTED tells the scheduler to run
    // the prompt again elsewhere rather than blame the puller.
    if (absl::IsUnavailable(pulled) || absl::IsPermissionDenied(pulled)) {
      return absl::AbortedError(absl::StrCat("KV pull from the prefill instance failed: ", pulled.message()));
    }
    return pulled;
  }
  if (!call.emit(DecodeEvent{.kv_transferred = report})) {
    Abandon(call.request_id);
    return absl::CancelledError("receiver gone");
  }
  absl::Status started = loop_->Call([&](Engine& engine) {
    loop_->Subscribe(seq_id, sink);
    return engine.StartDecoding(seq_id);
  });
  if (!started.ok()) Abandon(call.request_id);
  return started;
}

absl::Status Worker::Decode(DecodeCall call) {
  // A decode instance also prefills a request itself when the scheduler chose not to hand it off
  // (conditional disaggregation: its prefix cache holds most of the prompt).
  const bool handed_off = call.kv.has_value();
  if (options_.role == WorkerRole::kPrefill || (handed_off && options_.role != WorkerRole::kDecode)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", WorkerRoleName(options_.role), " ", options_.instance_idx, " cannot decode a ",
        handed_off ? "handed-off" : "fresh", " request"));
  }
  if (draining_) return WorkerDrainingError();
  // A new grammar is compiled here, on the caller's thread, not by the engine loop (where every
  // running sequence would wait for it); an error is the engine's to report, as before.
  if (call.params.constraint.active()) loop_->PrecompileConstraint(call.params.constraint).IgnoreError();
  const std::string& request_id = call.request_id;
  ASSIGN_OR_RETURN(WorkerRequest request, requests_.Add(request_id));
  std::shared_ptr<TokenChannel> channel = request.channel;
  // Runs on the engine thread: a request whose caller stopped taking its tokens (its client does not
  // read) leaves the batch until NextOutput sees the caller catch up.
  TokenSink sink = [this, channel](absl::StatusOr<TokenOutput> out) {
    const std::optional<SeqId> seq_id = out.ok() ? std::optional<SeqId>(out->seq_id) : std::nullopt;
    if (channel->Push(std::move(out)) && seq_id) loop_->Pause(*seq_id);
  };

  if (handed_off) {
    RETURN_IF_ERROR(StartHandedOff(call, request, sink));
  } else {
    absl::StatusOr<SeqId> seq_id = loop_->Call([&](Engine& engine) -> absl::StatusOr<SeqId> {
      absl::StatusOr<SeqId> id = engine.AddRequest(std::move(call.prompt_token_ids), call.params,
                                                   std::move(call.generated_token_ids));
      if (id.ok()) loop_->Subscribe(*id, sink);
      return id;
    });
    if (!seq_id.ok()) {
      requests_.Remove(request_id);
      return seq_id.status();
    }
    requests_.SetSeqId(request_id, *seq_id);
  }

  while (true) {
    absl::StatusOr<TokenOutput> out = NextOutput(*channel, call.deadline, call.is_cancelled);
    if (!out.ok()) {
      Abandon(request_id);
      return out.status();
    }
    const bool finished = out->finish_reason != FinishReason::kNone;
    if (finished) requests_.Remove(request_id);
    if (!call.emit(DecodeEvent{.token = std::move(*out)})) {
      if (!finished) Abandon(request_id);
      return absl::CancelledError("receiver gone");
    }
    if (finished) return absl::OkStatus();
  }
}

bool Worker::Cancel(const std::string& request_id) {
  std::optional<WorkerRequest> request = requests_.MarkCancelled(request_id);
  if (!request) return false;
  // A prefill request holding KV has no waiting call: free it here.
  if (request->kv_lease_deadline) {
    FreeHeldKv(*request->seq_id, request->kv_grant);
    return true;
  }
  // Wake the call serving the request; it cleans up (a Prefill that finishes meanwhile sees the
  // mark when it starts the lease, and frees the KV itself).
  request->channel->Push(TokenOutput{.finish_reason = FinishReason::kCancelled});
  return true;
}

WorkerStatsSnapshot Worker::Stats() const {
  return WorkerStatsSnapshot{.engine = loop_->stats(),
                             .num_prefill_tokens_outstanding = prefill_tokens_outstanding_.load(),
                             .num_requests_holding_kv = requests_.NumHoldingKv(),
                             .num_requests_waiting_for_kv = num_waiting_for_kv_.load(),
                             .ranks = rank_holdings_};
}

}  // namespace baton::runtime
