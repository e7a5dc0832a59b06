// A one-line progress bar for a run, redrawn in place on a terminal:
//   [##########----------]  52/100 done (1 failed), 8 in flight, 61.0 s
// ProgressBar draws it from RunProgress on its own thread until Stop; it draws nothing unless the
// stream is a terminal, so logs and CI output stay clean.
#pragma once

#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

#include "benchmarks/bench/runner.h"

namespace baton::bench {

struct ProgressSnapshot {
  int num_total = 0;
  int num_completed = 0;
  int num_failed = 0;
  int num_in_flight = 0;
  double elapsed_s = 0;
};

// The line without a line end; `bar_width` cells of '#' (done) and '-' (to do).
std::string FormatProgress(const ProgressSnapshot& snapshot, int bar_width);

class ProgressBar {
 public:
  // Starts drawing if `out` is a terminal. `progress` must outlive the bar.
  ProgressBar(const RunProgress* progress, int num_total, std::FILE* out = stderr);
  ~ProgressBar();  // Stop()
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Draws the final state, ends the line, and joins the thread. Idempotent.
  void Stop();

 private:
  void Draw();

  const RunProgress* progress_;
  const int num_total_;
  std::FILE* out_;
  const std::chrono::steady_clock::time_point start_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;  // not joinable when out_ is no terminal
};

}  // namespace baton::bench
