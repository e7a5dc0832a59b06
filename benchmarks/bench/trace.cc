#include "benchmarks/bench/trace.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"

namespace baton::bench {

absl::StatusOr<std::vector<TraceEntry>> LoadTrace(const std::filesystem::path& path,
                                                  const runtime::Tokenizer* tokenizer) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("trace ", path.string(), " not found"));
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::vector<TraceEntry> entries;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(buffer.str(), '\n')) {
    ++line_number;
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    const auto bad = [&](absl::string_view what) {
      return absl::InvalidArgumentError(absl::StrCat(path.string(), ":", line_number, ": ", what));
    };
    const nlohmann::json row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!row.is_object()) return bad("not a JSON object");
    TraceEntry entry;
    if (!row.contains("arrival_s") || !row["arrival_s"].is_number() ||
        !std::isfinite(entry.arrival_s = row["arrival_s"].get<double>()) || entry.arrival_s < 0) {
      return bad("arrival_s: expected a number >= 0");
    }
    if (!row.contains("output_len") || !row["output_len"].is_number_integer() ||
        (entry.item.output_len = row["output_len"].get<int>()) < 1) {
      return bad("output_len: expected an integer >= 1");
    }
    const bool has_len = row.contains("input_len");
    const bool has_prompt = row.contains("prompt");
    if (has_len == has_prompt) return bad("give exactly one of input_len and prompt");
    if (has_len) {
      if (!row["input_len"].is_number_integer() ||
          (entry.item.input_len = row["input_len"].get<int>()) < 1) {
        return bad("input_len: expected an integer >= 1");
      }
    } else {
      if (!row["prompt"].is_string()) return bad("prompt: expected a string");
      if (tokenizer == nullptr) {
        return absl::FailedPreconditionError(
            absl::StrCat(path.string(), ":", line_number, ": a prompt needs a tokenizer"));
      }
      entry.item.prompt_ids = tokenizer->Encode(row["prompt"].get<std::string>(), true);
      entry.item.input_len = static_cast<int>(entry.item.prompt_ids.size());
      if (entry.item.input_len == 0) return bad("prompt: encodes to no token");
    }
    entries.push_back(std::move(entry));
  }
  if (entries.empty())
    return absl::InvalidArgumentError(absl::StrCat(path.string(), ": empty trace"));
  std::stable_sort(entries.begin(), entries.end(), [](const TraceEntry& a, const TraceEntry& b) {
    return a.arrival_s < b.arrival_s;
  });
  const double origin = entries.front().arrival_s;
  for (TraceEntry& entry : entries) entry.arrival_s -= origin;
  return entries;
}

}  // namespace baton::bench
