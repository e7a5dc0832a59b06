#include "runtime/tokenizer/stop_matcher.h"

#include <algorithm>
#include <utility>

namespace baton::runtime {

StopMatcher::StopMatcher(std::vector<std::string> stop_strings) {
  for (auto& stop : stop_strings) {
    if (!stop.empty()) stop_strings_.push_back(std::move(stop));
  }
}

std::string StopMatcher::Feed(std::string_view text) {
  if (stopped_) return "";
  pending_.append(text);
  // The earliest complete stop string wins.
  size_t stop_at = std::string::npos;
  for (const auto& stop : stop_strings_) stop_at = std::min(stop_at, pending_.find(stop));
  if (stop_at != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, stop_at);
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
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopMatcher::Flush() { return std::exchange(pending_, ""); }

}  // namespace baton::runtime
