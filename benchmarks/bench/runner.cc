#include "benchmarks/bench/runner.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "kernels/common/check.h"

namespace baton::bench {
namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(10);

double SecondsSince(Clock::time_point start, Clock::time_point t) {
  return std::chrono::duration<double>(t - start).count();
}

class OpenLoopRun {
 public:
  OpenLoopRun(GenerationClient& client, const std::vector<PlannedRequest>& plan,
              const RunnerOptions& options)
      : client_(client),
        plan_(plan),
        options_(options),
        records_(plan.size()),
        sent_(plan.size(), false),
        cancels_(plan.size()) {
    for (auto& cancel : cancels_) cancel = std::make_unique<Cancellation>();
  }

  RunResult Run() {
    start_ = Clock::now();
    for (size_t i = 0; i < plan_.size() && !Stopping(); ++i) {
      if (plan_[i].turn > 0) continue;  // sent by its session's worker (RunSession)
      if (!WaitUntil(start_ + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(plan_[i].arrival_s)))) {
        break;
      }
      if (!Dispatch(i)) break;
    }
    WaitForInFlight();
    {
      std::lock_guard<std::mutex> lock(mu_);
      closing_ = true;
    }
    work_cv_.notify_all();
    for (std::thread& worker : workers_) worker.join();

    RunResult result;
    result.dispatch = dispatch_;
    result.dispatch.max_concurrency = options_.max_concurrency;
    result.dispatch.interrupted = Stopping();
    result.dispatch.duration_s = SecondsSince(start_, Clock::now());
    for (size_t i = 0; i < plan_.size(); ++i) {
      if (!sent_[i]) {
        ++result.dispatch.num_not_sent;
        continue;
      }
      result.dispatch.max_dispatch_lag_s =
          std::max(result.dispatch.max_dispatch_lag_s, records_[i].sent_s - records_[i].arrival_s);
      result.records.push_back(std::move(records_[i]));
    }
    return result;
  }

 private:
  bool Stopping() const { return options_.stop != nullptr && options_.stop->load(); }

  // Sleeps until `deadline`; false if the run was stopped first.
  bool WaitUntil(Clock::time_point deadline) {
    while (Clock::now() < deadline) {
      if (Stopping()) return false;
      std::this_thread::sleep_until(std::min(deadline, Clock::now() + kPollInterval));
    }
    return !Stopping();
  }

  // Hands request i to a worker once a slot is free; false if the run was stopped first.
  bool Dispatch(size_t i) {
    std::unique_lock<std::mutex> lock(mu_);
    if (num_in_flight_ >= options_.max_concurrency) {
      ++dispatch_.num_delayed_by_cap;
      while (num_in_flight_ >= options_.max_concurrency) {
        if (Stopping()) return false;
        slot_cv_.wait_for(lock, kPollInterval);
      }
    }
    ++num_in_flight_;
    dispatch_.max_in_flight = std::max(dispatch_.max_in_flight, num_in_flight_);
    sent_[i] = true;
    queue_.push_back(i);
    if (num_idle_ > 0) {
      work_cv_.notify_one();
    } else {
      workers_.emplace_back([this] { WorkerLoop(); });
    }
    if (options_.progress != nullptr) {
      options_.progress->num_sent.fetch_add(1);
      options_.progress->num_in_flight.store(num_in_flight_);
    }
    return true;
  }

  // Waits for every request in flight to end, cancelling them all once the run is stopped.
  void WaitForInFlight() {
    bool cancelled = false;
    std::unique_lock<std::mutex> lock(mu_);
    while (num_in_flight_ > 0) {
      if (!cancelled && Stopping()) {
        // Under the lock: a session's worker marks a later turn sent under it too, or sees the stop.
        cancelled = true;
        for (size_t i = 0; i < plan_.size(); ++i) {
          if (sent_[i]) cancels_[i]->Cancel();
        }
        continue;
      }
      slot_cv_.wait_for(lock, kPollInterval);
    }
  }

  void WorkerLoop() {
    while (true) {
      size_t i;
      {
        std::unique_lock<std::mutex> lock(mu_);
        ++num_idle_;
        work_cv_.wait(lock, [this] { return !queue_.empty() || closing_; });
        --num_idle_;
        if (queue_.empty()) return;
        i = queue_.front();
        queue_.pop_front();
      }
      const bool ok = RunSession(i);
      {
        std::lock_guard<std::mutex> lock(mu_);
        --num_in_flight_;
        if (options_.progress != nullptr) {
          (ok ? options_.progress->num_completed : options_.progress->num_failed).fetch_add(1);
          options_.progress->num_in_flight.store(num_in_flight_);
        }
      }
      slot_cv_.notify_all();
    }
  }

  // Request i, then the later turns of its session (if any) while they succeed.
  bool RunSession(size_t i) {
    std::vector<int32_t> prompt = plan_[i].prompt_ids;
    std::vector<int32_t> answer;
    bool ok = RunRequest(i, prompt, &answer);
    for (size_t j = i + 1; ok && j < plan_.size() && plan_[i].session >= 0 && plan_[j].turn > 0 &&
                           plan_[j].session == plan_[i].session;
         ++j) {
      if (answer.empty()) {
        records_[i].error = "multi-turn: the server sent no answer to append to the history";
        return false;
      }
      if (!WaitUntil(Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(plan_[j].think_s)))) {
        return ok;
      }
      prompt.insert(prompt.end(), answer.begin(), answer.end());
      prompt.insert(prompt.end(), plan_[j].prompt_ids.begin(), plan_[j].prompt_ids.end());
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (Stopping()) return ok;
        sent_[j] = true;
      }
      if (options_.progress != nullptr) options_.progress->num_sent.fetch_add(1);
      ok = RunRequest(j, prompt, &answer);
      if (options_.progress != nullptr && j + 1 < plan_.size() && plan_[j + 1].session == plan_[i].session) {
        (ok ? options_.progress->num_completed : options_.progress->num_failed).fetch_add(1);
      }
    }
    return ok;
  }

  bool RunRequest(size_t i, const std::vector<int32_t>& prompt_ids, std::vector<int32_t>* answer) {
    const PlannedRequest& planned = plan_[i];
    RequestRecord& record = records_[i];
    record.request_idx = planned.request_idx;
    record.warmup = planned.warmup;
    record.input_len = planned.turn > 0 ? static_cast<int>(prompt_ids.size()) : planned.input_len;
    record.output_len = planned.output_len;
    record.arrival_s = planned.turn > 0 ? SecondsSince(start_, Clock::now()) : planned.arrival_s;
    GenerationRequest request{.request_id = absl::StrCat("bench-", planned.request_idx),
                              .prompt_ids = prompt_ids,
                              .prompt_text = planned.prompt_text,
                              .max_tokens = planned.output_len,
                              .ignore_eos = true,
                              .timeout = options_.request_timeout};
    GenerationTrace trace;
    record.sent_s = SecondsSince(start_, Clock::now());
    const absl::Status status = client_.Generate(request, cancels_[i].get(), &trace);
    record.end_s = SecondsSince(start_, Clock::now());
    record.token_s.reserve(trace.token_times.size());
    for (Clock::time_point t : trace.token_times) record.token_s.push_back(SecondsSince(start_, t));
    record.num_output_tokens = trace.num_output_tokens;
    record.num_prompt_tokens = trace.num_prompt_tokens;
    record.num_cached_tokens = trace.num_cached_tokens;
    *answer = std::move(trace.output_ids);
    if (answer->empty() && options_.encode_answer && !trace.output_text.empty()) {
      *answer = options_.encode_answer(trace.output_text);
    }
    record.finish_reason = trace.finish_reason;
    record.server = std::move(trace.server);
    record.ok = status.ok();
    record.cancelled = absl::IsCancelled(status) && cancels_[i]->cancelled();
    if (!status.ok()) record.error = status.ToString();
    return status.ok();
  }

  GenerationClient& client_;
  const std::vector<PlannedRequest>& plan_;
  const RunnerOptions& options_;
  Clock::time_point start_;

  std::vector<RequestRecord> records_;  // [plan.size()], slot i written only by its worker
  std::vector<bool> sent_;              // [plan.size()], written by the dispatcher under mu_
  std::vector<std::unique_ptr<Cancellation>> cancels_;  // [plan.size()]

  std::mutex mu_;
  std::condition_variable work_cv_;  // queue_ grew or closing_
  std::condition_variable slot_cv_;  // a request ended
  std::deque<size_t> queue_;
  std::vector<std::thread> workers_;
  int num_idle_ = 0;
  int num_in_flight_ = 0;
  bool closing_ = false;
  DispatchStats dispatch_;
};

}  // namespace

RunResult RunOpenLoop(GenerationClient& client, const std::vector<PlannedRequest>& plan,
                      const RunnerOptions& options) {
  BATON_CHECK(options.max_concurrency >= 1);
  return OpenLoopRun(client, plan, options).Run();
}

}  // namespace baton::bench
