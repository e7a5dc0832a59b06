#include "benchmarks/bench/progress_bar.h"

#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_format.h"

namespace baton::bench {

std::string FormatProgress(const ProgressSnapshot& s, int bar_width) {
  const int num_done = s.num_completed + s.num_failed;
  const int filled =
      s.num_total > 0 ? std::clamp(num_done * bar_width / s.num_total, 0, bar_width) : 0;
  std::string line(bar_width + 2, '-');
  line.front() = '[';
  line.back() = ']';
  std::fill_n(line.begin() + 1, filled, '#');
  absl::StrAppendFormat(&line, " %d/%d done", num_done, s.num_total);
  if (s.num_failed > 0) absl::StrAppendFormat(&line, " (%d failed)", s.num_failed);
  absl::StrAppendFormat(&line, ", %d in flight, %.1f s", s.num_in_flight, s.elapsed_s);
  return line;
}

ProgressBar::ProgressBar(const RunProgress* progress, int num_total, std::FILE* out)
    : progress_(progress),
      num_total_(num_total),
      out_(out),
      start_(std::chrono::steady_clock::now()) {
  if (::isatty(::fileno(out_)) == 0) return;
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
      Draw();
      cv_.wait_for(lock, std::chrono::milliseconds(200));
    }
  });
}

ProgressBar::~ProgressBar() { Stop(); }

void ProgressBar::Stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
  Draw();
  std::fputc('\n', out_);
  std::fflush(out_);
}

void ProgressBar::Draw() {
  const ProgressSnapshot snapshot{
      .num_total = num_total_,
      .num_completed = progress_->num_completed.load(),
      .num_failed = progress_->num_failed.load(),
      .num_in_flight = progress_->num_in_flight.load(),
      .elapsed_s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count()};
  // \r returns to the line start, \033[K clears what a longer previous line left.
  std::fprintf(out_, "\r%s\033[K", FormatProgress(snapshot, 30).c_str());
  std::fflush(out_);
}

}  // namespace baton::bench
