// ServingMetrics: the scheduler's Prometheus metrics, served as text at GET /metrics on the OpenAI
// HTTP port (openai_http.h). vLLM's names under a `baton:` prefix, and what disaggregation adds:
//
//   histograms (seconds unless named _bytes), one sample per request unless said:
//     baton:time_to_first_token_seconds     arrival -> the first token written (scheduler clock)
//     baton:inter_token_latency_seconds     one sample per gap between consecutive tokens
//     baton:time_per_output_token_seconds   the same gaps under vLLM's older name (dashboards use it)
//     baton:request_time_per_output_token_seconds   a finished request's mean gap after its first
//                                           token: (e2e - TTFT) / (generated - 1), the TPOT of
//                                           DistServe's SLO
//     baton:e2e_request_latency_seconds     arrival -> end, finished requests
//     baton:request_queue_time_seconds      arrival -> the prefill starts on a worker
//     baton:request_prefill_time_seconds    the prefill on the worker
//     baton:kv_transfer_time_seconds        the decode worker's pull of the KV (disaggregated)
//     baton:kv_transfer_bytes               bytes a request's hand-offs moved (disaggregated)
//     baton:request_phase_seconds{phase}    the breakdown of a request's start (request_metrics.h):
//                                           queue, prefill (together the TTFT), handoff_wait,
//                                           kv_transfer, first_decode_step
//   counters:
//     baton:prompt_tokens_total, baton:generation_tokens_total   every executed request's tokens
//     baton:request_success_total{finished_reason="stop"|"length"|"abort"}
//     baton:request_failure_total{code="UNAVAILABLE"|...}   executed requests that failed
//     baton:prompt_tokens_cached_total      prompt tokens a worker's prefix cache held (usage's
//                                           prompt_tokens_details.cached_tokens)
//     baton:routing_decisions_total{role, reason="prefix_cache"|"least_loaded"|"no_room"}
//                                           every pick of an instance (routing.h)
//     baton:conditional_disagg_decisions_total{path="local"|"remote"}   disaggregated requests
//                                           prefilled on their decode instance, or handed off
//   gauges per live worker instance, labelled role="prefill"|"decode"|"colocated" and instance="0"..,
//   from the workers' heartbeats (WorkerStats):
//     baton:num_requests_running, baton:num_requests_waiting, baton:kv_cache_usage_perc (0..1),
//     baton:num_requests_swapped (preempted with their KV in the phase's swap_space),
//     baton:kv_handoff_queue_depth (prefill instances: requests holding KV for a decode worker)
//   and counters per live worker instance, labelled the same, since it started:
//     baton:prefix_cache_queries_total, baton:prefix_cache_hits_total (tokens; vLLM's)
//
// Every sample carries model_name="<the served model's name>", as vLLM's (dashboards filter by it).
//
// Record is called once per executed request (RequestDriverOptions::on_request_done); Scrape reads
// the registry for the gauges. Both are thread-safe.
#pragma once

#include <memory>
#include <string>

#include "scheduler/global/request_metrics.h"
#include "scheduler/global/worker_registry.h"

namespace prometheus {
class Registry;
class Histogram;
class Counter;
template <typename T>
class Family;
}  // namespace prometheus

namespace baton::scheduler {

// Prometheus text exposition format, version 0.0.4.
inline constexpr char kPrometheusContentType[] = "text/plain; version=0.0.4; charset=utf-8";

class ServingMetrics {
 public:
  // registry must outlive the metrics; model_name labels every sample.
  ServingMetrics(const WorkerRegistry* registry, std::string model_name);
  ~ServingMetrics();

  void Record(const RequestMetrics& request);
  // Every metric in the text exposition format.
  std::string Scrape() const;

 private:
  const WorkerRegistry* workers_;
  const std::string model_name_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Histogram* ttft_;
  prometheus::Histogram* inter_token_;
  prometheus::Histogram* time_per_output_token_;
  prometheus::Histogram* request_tpot_;
  prometheus::Histogram* e2e_;
  prometheus::Histogram* queue_;
  prometheus::Histogram* prefill_;
  prometheus::Histogram* kv_transfer_time_;
  prometheus::Histogram* kv_transfer_bytes_;
  prometheus::Histogram* phase_queue_;
  prometheus::Histogram* phase_prefill_;
  prometheus::Histogram* phase_handoff_wait_;
  prometheus::Histogram* phase_kv_transfer_;
  prometheus::Histogram* phase_first_decode_step_;
  prometheus::Counter* prompt_tokens_;
  prometheus::Counter* generation_tokens_;
  prometheus::Family<prometheus::Counter>* success_;
  prometheus::Family<prometheus::Counter>* failure_;
  prometheus::Counter* prompt_tokens_cached_;
  prometheus::Family<prometheus::Counter>* routing_;
  prometheus::Family<prometheus::Counter>* prefill_path_;
};

}  // namespace baton::scheduler
