#include "scheduler/service/metrics.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

namespace baton::scheduler {
namespace {

// vLLM's buckets (vllm/v1/metrics/loggers.py): time to first token, inter-token latency, and
// request latencies (e2e, queue, prefill).
const prometheus::Histogram::BucketBoundaries kTtftBuckets = {
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
    1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
const prometheus::Histogram::BucketBoundaries kItlBuckets = {
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
    0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
const prometheus::Histogram::BucketBoundaries kRequestLatencyBuckets = {
    0.3,  0.5,  0.8,  1.0,  1.5,  2.0,   2.5,   5.0,   10.0,  15.0,  20.0,
    30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

// 1 KiB to 64 GiB by factors of 4.
prometheus::Histogram::BucketBoundaries KvBytesBuckets() {
  prometheus::Histogram::BucketBoundaries buckets;
  for (double b = 1024; b <= 64.0 * (1ull << 30); b *= 4) buckets.push_back(b);
  return buckets;
}

prometheus::Histogram* AddHistogram(prometheus::Registry& registry, const std::string& name,
                                    const std::string& help,
                                    const prometheus::Histogram::BucketBoundaries& buckets) {
  return &prometheus::BuildHistogram().Name(name).Help(help).Register(registry).Add({}, buckets);
}

prometheus::Counter* AddCounter(prometheus::Registry& registry, const std::string& name,
                                const std::string& help) {
  return &prometheus::BuildCounter().Name(name).Help(help).Register(registry).Add({});
}

void Observe(prometheus::Histogram* histogram, const std::optional<double>& value) {
  if (value) histogram->Observe(*value);
}

// A family of one sample per live instance, built at scrape time from the registry: gauges, and
// counters the workers keep (reset when a worker restarts, as a process's counters are).
prometheus::MetricFamily GaugeFamily(const std::string& name, const std::string& help) {
  return prometheus::MetricFamily{.name = name, .help = help, .type = prometheus::MetricType::Gauge, .metric = {}};
}
prometheus::MetricFamily CounterFamily(const std::string& name, const std::string& help) {
  return prometheus::MetricFamily{.name = name, .help = help, .type = prometheus::MetricType::Counter, .metric = {}};
}

void AddSample(prometheus::MetricFamily& family, const WorkerEntry& worker, double value) {
  prometheus::ClientMetric metric;
  metric.label = {{"instance", std::to_string(worker.instance_idx)},
                  {"role", std::string(runtime::WorkerRoleName(worker.role))}};
  if (family.type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  family.metric.push_back(std::move(metric));
}

}  // namespace

ServingMetrics::ServingMetrics(const WorkerRegistry* workers, std::string model_name)
    : workers_(workers), model_name_(std::move(model_name)), registry_(std::make_shared<prometheus::Registry>()) {
  prometheus::Registry& r = *registry_;
  ttft_ = AddHistogram(r, "baton:time_to_first_token_seconds",
                       "Histogram of time to first token in seconds (arrival to the first token written).",
                       kTtftBuckets);
  inter_token_ = AddHistogram(r, "baton:inter_token_latency_seconds",
                              "Histogram of inter-token latency in seconds (worker emission stamps).",
                              kItlBuckets);
  time_per_output_token_ = AddHistogram(r, "baton:time_per_output_token_seconds",
                                        "Histogram of time per output token in seconds (the inter-token "
                                        "gaps, vLLM's older name).",
                                        kItlBuckets);
  request_tpot_ = AddHistogram(r, "baton:request_time_per_output_token_seconds",
                               "Histogram of a finished request's mean time per output token after the "
                               "first, in seconds.",
                               kItlBuckets);
  e2e_ = AddHistogram(r, "baton:e2e_request_latency_seconds",
                      "Histogram of end-to-end latency of finished requests in seconds.", kRequestLatencyBuckets);
  queue_ = AddHistogram(r, "baton:request_queue_time_seconds",
                        "Histogram of time from arrival to the start of the prefill in seconds.",
                        kRequestLatencyBuckets);
  prefill_ = AddHistogram(r, "baton:request_prefill_time_seconds",
                          "Histogram of prefill time on the worker in seconds.", kRequestLatencyBuckets);
  kv_transfer_time_ = AddHistogram(r, "baton:kv_transfer_time_seconds",
                                   "Histogram of the KV hand-off's pull time per request in seconds.",
                                   kTtftBuckets);
  kv_transfer_bytes_ = AddHistogram(r, "baton:kv_transfer_bytes",
                                    "Histogram of the KV bytes a request's hand-offs moved.", KvBytesBuckets());
  auto& phases = prometheus::BuildHistogram()
                     .Name("baton:request_phase_seconds")
                     .Help("Histogram of the phases of a request's start in seconds: queue and prefill make "
                           "up the time to first token; handoff_wait, kv_transfer and first_decode_step lead "
                           "to the second token.")
                     .Register(r);
  phase_queue_ = &phases.Add({{"phase", "queue"}}, kTtftBuckets);
  phase_prefill_ = &phases.Add({{"phase", "prefill"}}, kTtftBuckets);
  phase_handoff_wait_ = &phases.Add({{"phase", "handoff_wait"}}, kTtftBuckets);
  phase_kv_transfer_ = &phases.Add({{"phase", "kv_transfer"}}, kTtftBuckets);
  phase_first_decode_step_ = &phases.Add({{"phase", "first_decode_step"}}, kTtftBuckets);
  prompt_tokens_ = AddCounter(r, "baton:prompt_tokens_total", "Number of prefill tokens processed.");
  generation_tokens_ = AddCounter(r, "baton:generation_tokens_total", "Number of generation tokens processed.");
  success_ = &prometheus::BuildCounter()
                  .Name("baton:request_success_total")
                  .Help("Count of successfully processed requests, by finished_reason.")
                  .Register(r);
  failure_ = &prometheus::BuildCounter()
                  .Name("baton:request_failure_total")
                  .Help("Count of executed requests that failed, by status code.")
                  .Register(r);
  prompt_tokens_cached_ = AddCounter(r, "baton:prompt_tokens_cached_total",
                                     "Number of prompt tokens whose KV came from a worker's prefix cache.");
  routing_ = &prometheus::BuildCounter()
                  .Name("baton:routing_decisions_total")
                  .Help("Instances picked for a phase of a request, by role and reason.")
                  .Register(r);
  prefill_path_ = &prometheus::BuildCounter()
                       .Name("baton:conditional_disagg_decisions_total")
                       .Help("Disaggregated requests prefilled on their decode instance (local) or handed "
                             "off from a prefill instance (remote).")
                       .Register(r);
}

ServingMetrics::~ServingMetrics() = default;

void ServingMetrics::Record(const RequestMetrics& request) {
  prompt_tokens_->Increment(request.num_prompt_tokens);
  prompt_tokens_cached_->Increment(request.num_cached_tokens);
  for (const RouteRecord& route : request.routes) {
    routing_->Add({{"role", std::string(runtime::WorkerRoleName(route.role))}, {"reason", route.label}}).Increment();
  }
  if (request.prefill_path != nullptr) prefill_path_->Add({{"path", request.prefill_path}}).Increment();
  generation_tokens_->Increment(request.num_generated_tokens);
  const RequestPhases phases = PhasesOf(request);
  Observe(ttft_, phases.ttft);
  for (const int64_t gap_us : request.inter_token_us) {
    inter_token_->Observe(static_cast<double>(gap_us) * 1e-6);
    time_per_output_token_->Observe(static_cast<double>(gap_us) * 1e-6);
  }
  Observe(queue_, phases.queue);
  Observe(prefill_, phases.prefill);
  Observe(kv_transfer_time_, phases.kv_transfer);
  if (request.kv_transfer_bytes > 0) kv_transfer_bytes_->Observe(static_cast<double>(request.kv_transfer_bytes));
  Observe(phase_queue_, phases.queue);
  Observe(phase_prefill_, phases.prefill);
  Observe(phase_handoff_wait_, phases.handoff_wait);
  Observe(phase_kv_transfer_, phases.kv_transfer);
  Observe(phase_first_decode_step_, phases.first_decode_step);
  if (request.status.ok()) {
    Observe(e2e_, phases.e2e);
    if (phases.e2e && phases.ttft && request.num_generated_tokens > 1) {
      request_tpot_->Observe((*phases.e2e - *phases.ttft) / (request.num_generated_tokens - 1));
    }
    const char* reason = FinishedReasonLabel(request.finish_reason);
    success_->Add({{"finished_reason", reason ? reason : "none"}}).Increment();
  } else if (absl::IsCancelled(request.status)) {
    success_->Add({{"finished_reason", "abort"}}).Increment();  // vLLM counts aborts here
  } else {
    failure_->Add({{"code", absl::StatusCodeToString(request.status.code())}}).Increment();
  }
}

std::string ServingMetrics::Scrape() const {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  prometheus::MetricFamily running = GaugeFamily("baton:num_requests_running",
                                                 "Number of requests in the instance's running batch.");
  prometheus::MetricFamily waiting = GaugeFamily("baton:num_requests_waiting",
                                                 "Number of requests waiting on the instance.");
  prometheus::MetricFamily swapped = GaugeFamily(
      "baton:num_requests_swapped", "Number of requests preempted with their KV swapped to host memory.");
  prometheus::MetricFamily kv_usage = GaugeFamily("baton:kv_cache_usage_perc",
                                                  "KV-cache usage of the instance: 1 means 100 percent.");
  prometheus::MetricFamily handoff = GaugeFamily(
      "baton:kv_handoff_queue_depth",
      "Prefill instances: requests holding KV blocks while they wait for a decode worker to pull them.");
  prometheus::MetricFamily prefix_queries = CounterFamily(
      "baton:prefix_cache_queries_total", "Prefix cache queries, in tokens: those of the prompts the instance admitted.");
  prometheus::MetricFamily prefix_hits = CounterFamily(
      "baton:prefix_cache_hits_total", "Prefix cache hits, in tokens: prompt tokens whose KV came from the cache.");
  for (const WorkerEntry& worker : workers_->Snapshot()) {
    if (!worker.alive) continue;
    const WorkerLoad& load = worker.reported;
    AddSample(running, worker, load.num_requests_running);
    AddSample(waiting, worker, load.num_requests_waiting);
    AddSample(swapped, worker, load.num_requests_swapped);
    AddSample(kv_usage, worker,
             load.num_kv_blocks_total > 0
                 ? static_cast<double>(load.num_kv_blocks_used) / load.num_kv_blocks_total
                 : 0.0);
    if (worker.role == WorkerRole::kPrefill) AddSample(handoff, worker, load.num_requests_holding_kv);
    AddSample(prefix_queries, worker, static_cast<double>(load.prefix_cache_queries));
    AddSample(prefix_hits, worker, static_cast<double>(load.prefix_cache_hits));
  }
  for (prometheus::MetricFamily* family :
       {&running, &waiting, &swapped, &kv_usage, &handoff, &prefix_queries, &prefix_hits}) {
    std::sort(family->metric.begin(), family->metric.end(),
              [](const prometheus::ClientMetric& a, const prometheus::ClientMetric& b) { return a.label < b.label; });
    families.push_back(std::move(*family));
  }
  for (prometheus::MetricFamily& family : families) {
    for (prometheus::ClientMetric& metric : family.metric) {
      metric.label.push_back({"model_name", model_name_});
      std::sort(metric.label.begin(), metric.label.end(),
                [](const prometheus::ClientMetric::Label& a, const prometheus::ClientMetric::Label& b) {
                  return a.name < b.name;
                });
    }
  }
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace baton::scheduler
