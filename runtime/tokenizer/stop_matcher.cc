#include "runtime/tokenizer/stop_matcher.h"

#include <algorithm>
#include <utility>

namespace baton::runtime {

StopMatcher::StopMatcher(std::vector<std::string> stop_strings, bool include_stop)
    : include_stop_(include_stop) {
  for (auto& stop : stop_strings) {
    if (!stop.empty()) stop_strings_.push_back(std::move(stop));
  }
}

std::string StopMatcher::Feed(std::string_view text, bool may_stop) {
  if (stopped_) return "";
  pending_.append(text);
  if (!may_stop) num_unarmed_ = pending_.size();
  // The earliest complete stop string wins; it must end after the unarmed bytes.
  size_t stop_at = std::string::npos, stop_size = 0;
  for (const auto& stop : stop_strings_) {
    if (!may_stop) break;
    const size_t from = num_unarmed_ + 1 > stop.size() ? num_unarmed_ + 1 - stop.size() : 0;
    const size_t at = pending_.find(stop, from);
    if (at < stop_at) {
      stop_at = at;
      stop_size = stop.size();
    }
  }
  if (stop_at != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, include_stop_ ? stop_at + stop_size : stop_at);
    pending_.clear();
    return out;
  }
  // Hold back the longest suffix that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const auto& stop : stop_strings_) {
    for (size_t len = std::min(stop.size() - 1, pending_.size()); len > hold; --len) {
      if (pending_.compare(pending_.size() - len, len, stop, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  const size_t released = pending_.size() - hold;
  std::string out = pending_.substr(0, released);
  pending_.erase(0, released);
  num_unarmed_ = num_unarmed_ > released ? num_unarmed_ - released : 0;
  return out;
}

std::string StopMatcher::Flush() {
  num_unarmed_ = 0;
  return std::exchange(pending_, "");
}

}  // namespace baton::runtime
