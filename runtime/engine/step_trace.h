// Step traces: every step an engine ran, what it computed and when, as JSON lines, for fitting the
// planner's serving slowdown to a served run (`baton serve --step-trace-dir`, then `baton plan
// calibrate --step-traces`).
//
// A trace file is one header line, {"role", "instance", "tp", "pp", "device", "pid"}, then a line
// per finished step, {"start_us", "end_us", "prompt_tokens", "prompt_tokens_squared",
// "decode_seqs", "decode_context", "busy_after"} (StepRecord's fields; Unix microseconds, so the
// traces of the processes of one host share a clock). Lines are flushed at least every kFlushEvery steps and
// when the writer is destroyed; a killed process loses at most that tail.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace baton::runtime {

// One finished step, as Engine::SetStepObserver reports it.
struct StepRecord {
  int64_t start_us = 0;  // handed to the ranks (Unix micros)
  int64_t end_us = 0;    // its outputs back
  int64_t prompt_tokens = 0;         // Σ q over the prompt (chunk) sequences
  double prompt_tokens_squared = 0;  // Σ q (q + 2 offset): a chunk's causal attention against its prefix
  int decode_seqs = 0;
  int64_t decode_context = 0;  // Σ tokens of the decode sequences, the one fed this step included
  // The engine still had work when the step was done: the time to its next step's start went to
  // serving (handing out tokens, taking requests), not to waiting for requests.
  bool busy_after = false;
};

// Who wrote a trace.
struct StepTraceHeader {
  std::string role;  // "prefill", "decode" or "colocated"
  int instance = 0;
  int tp = 1;
  int pp = 1;
  std::string device;  // "cpu", "cuda", "cuda-emulated"
};

class StepTraceWriter {
 public:
  static constexpr int kFlushEvery = 64;

  // Creates (truncates) the file and writes the header. InvalidArgument when it cannot be written.
  static absl::StatusOr<std::unique_ptr<StepTraceWriter>> Create(const std::filesystem::path& path,
                                                                 const StepTraceHeader& header);
  ~StepTraceWriter();

  void Append(const StepRecord& record);

 private:
  explicit StepTraceWriter(std::ofstream out) : out_(std::move(out)) {}
  std::ofstream out_;
  int unflushed_ = 0;
};

}  // namespace baton::runtime
