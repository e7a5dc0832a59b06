#include "benchmarks/bench/workload.h"

#include <algorithm>
#include <climits>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "kernels/common/status_macros.h"
#include "nlohmann/json.hpp"
#include "yaml-cpp/yaml.h"

namespace baton::bench {
namespace {

absl::Status Invalid(const std::filesystem::path& path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(path.string(), ": ", what));
}

absl::StatusOr<std::string> ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path.string()));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Reads one string key of a map; yaml-cpp throws on conversion errors, which stay in this file.
absl::StatusOr<std::string> StringKey(const YAML::Node& map, const std::string& key,
                                      const std::filesystem::path& path, const std::string& where) {
  const YAML::Node node = map[key];
  if (!node || !node.IsScalar()) return Invalid(path, absl::StrCat(where, ".", key, ": missing"));
  return node.as<std::string>();
}

absl::StatusOr<int> IntKey(const YAML::Node& map, const std::string& key,
                           const std::filesystem::path& path, const std::string& where) {
  ASSIGN_OR_RETURN(const std::string text, StringKey(map, key, path, where));
  int value;
  if (!absl::SimpleAtoi(text, &value) || value < 0) {
    return Invalid(path, absl::StrCat(where, ".", key, ": '", text, "' is not an integer >= 0"));
  }
  return value;
}

absl::Status CheckKeys(const YAML::Node& map, std::initializer_list<absl::string_view> allowed,
                       const std::filesystem::path& path, const std::string& where) {
  if (!map.IsMap()) return Invalid(path, absl::StrCat(where, ": expected a map"));
  for (const auto& entry : map) {
    const std::string key = entry.first.as<std::string>();
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      return Invalid(path, absl::StrCat("unknown key '", key, "' in ", where));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<LengthRange> RangeKey(const YAML::Node& root, const std::string& key,
                                     const std::filesystem::path& path) {
  const YAML::Node node = root[key];
  RETURN_IF_ERROR(CheckKeys(node, {"min", "max"}, path, key));
  LengthRange range;
  ASSIGN_OR_RETURN(range.min_len, IntKey(node, "min", path, key));
  ASSIGN_OR_RETURN(range.max_len, IntKey(node, "max", path, key));
  if (range.min_len < 1 || range.min_len > range.max_len) {
    return Invalid(path, absl::StrCat(key, ": need 1 <= min <= max"));
  }
  return range;
}

// lengths_csv: a header row naming the columns, then one integer row per request.
absl::StatusOr<std::vector<WorkloadItem>> LoadLengthsCsv(const YAML::Node& node,
                                                         const std::filesystem::path& path) {
  RETURN_IF_ERROR(CheckKeys(node, {"file", "input_column", "output_column"}, path, "lengths_csv"));
  ASSIGN_OR_RETURN(const std::string file, StringKey(node, "file", path, "lengths_csv"));
  ASSIGN_OR_RETURN(const std::string input_column,
                   StringKey(node, "input_column", path, "lengths_csv"));
  ASSIGN_OR_RETURN(const std::string output_column,
                   StringKey(node, "output_column", path, "lengths_csv"));
  const std::filesystem::path csv_path = path.parent_path() / file;
  ASSIGN_OR_RETURN(const std::string text, ReadFile(csv_path));
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n', absl::SkipWhitespace());
  if (lines.empty()) return Invalid(csv_path, "empty file");
  const std::vector<absl::string_view> header =
      absl::StrSplit(absl::StripAsciiWhitespace(lines[0]), ',');
  const auto column = [&](const std::string& name) -> absl::StatusOr<size_t> {
    const auto it = std::find(header.begin(), header.end(), name);
    if (it == header.end()) return Invalid(csv_path, absl::StrCat("no column '", name, "'"));
    return static_cast<size_t>(it - header.begin());
  };
  ASSIGN_OR_RETURN(const size_t input_idx, column(input_column));
  ASSIGN_OR_RETURN(const size_t output_idx, column(output_column));
  std::vector<WorkloadItem> items;
  items.reserve(lines.size() - 1);
  for (size_t row = 1; row < lines.size(); ++row) {
    const std::vector<absl::string_view> cells =
        absl::StrSplit(absl::StripAsciiWhitespace(lines[row]), ',');
    WorkloadItem item;
    if (cells.size() != header.size() || !absl::SimpleAtoi(cells[input_idx], &item.input_len) ||
        !absl::SimpleAtoi(cells[output_idx], &item.output_len) || item.input_len < 1 ||
        item.output_len < 1) {
      return Invalid(csv_path,
                     absl::StrCat("line ", row + 1, ": expected positive integer lengths"));
    }
    items.push_back(std::move(item));
  }
  return items;
}

// texts_jsonl: one JSON object per line holding the prompt and the reference output.
absl::StatusOr<std::vector<WorkloadItem>> LoadTextsJsonl(const YAML::Node& node,
                                                         const std::filesystem::path& path,
                                                         const runtime::Tokenizer* tokenizer) {
  RETURN_IF_ERROR(CheckKeys(node, {"file", "prompt_field", "output_field"}, path, "texts_jsonl"));
  ASSIGN_OR_RETURN(const std::string file, StringKey(node, "file", path, "texts_jsonl"));
  ASSIGN_OR_RETURN(const std::string prompt_field,
                   StringKey(node, "prompt_field", path, "texts_jsonl"));
  ASSIGN_OR_RETURN(const std::string output_field,
                   StringKey(node, "output_field", path, "texts_jsonl"));
  if (tokenizer == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(path.string(), ": texts_jsonl needs a tokenizer to count tokens"));
  }
  const std::filesystem::path jsonl_path = path.parent_path() / file;
  ASSIGN_OR_RETURN(const std::string text, ReadFile(jsonl_path));
  std::vector<WorkloadItem> items;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    const nlohmann::json row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!row.is_object() || !row.contains(prompt_field) || !row[prompt_field].is_string() ||
        !row.contains(output_field) || !row[output_field].is_string()) {
      return Invalid(jsonl_path, absl::StrCat("line ", line_number, ": expected string fields '",
                                              prompt_field, "' and '", output_field, "'"));
    }
    WorkloadItem item;
    item.prompt_ids = tokenizer->Encode(row[prompt_field].get<std::string>(), true);
    item.input_len = static_cast<int>(item.prompt_ids.size());
    item.output_len = std::max<int>(
        1, static_cast<int>(tokenizer->Encode(row[output_field].get<std::string>(), false).size()));
    if (item.input_len == 0) continue;
    items.push_back(std::move(item));
  }
  return items;
}

absl::StatusOr<WorkloadDefinition> ParseWorkload(const YAML::Node& root,
                                                 const std::filesystem::path& path,
                                                 const runtime::Tokenizer* tokenizer) {
  RETURN_IF_ERROR(CheckKeys(root,
                            {"name", "description", "lengths_csv", "texts_jsonl", "input_len",
                             "output_len", "filter", "max_total_len"},
                            path, "the top level"));
  WorkloadDefinition workload;
  ASSIGN_OR_RETURN(workload.name, StringKey(root, "name", path, "workload"));
  if (root["description"]) workload.description = root["description"].as<std::string>();
  const int num_forms = (root["lengths_csv"] ? 1 : 0) + (root["texts_jsonl"] ? 1 : 0) +
                        (root["input_len"] || root["output_len"] ? 1 : 0);
  if (num_forms != 1) {
    return Invalid(path, "give exactly one of lengths_csv, texts_jsonl, or input_len + output_len");
  }
  if (root["lengths_csv"]) {
    ASSIGN_OR_RETURN(workload.pool, LoadLengthsCsv(root["lengths_csv"], path));
  } else if (root["texts_jsonl"]) {
    ASSIGN_OR_RETURN(workload.pool, LoadTextsJsonl(root["texts_jsonl"], path, tokenizer));
  } else {
    ASSIGN_OR_RETURN(workload.input_len, RangeKey(root, "input_len", path));
    ASSIGN_OR_RETURN(workload.output_len, RangeKey(root, "output_len", path));
  }
  if (root["max_total_len"]) {
    ASSIGN_OR_RETURN(workload.max_total_len, IntKey(root, "max_total_len", path, "workload"));
    if (workload.is_pool()) return Invalid(path, "max_total_len applies to input_len/output_len");
    if (workload.max_total_len <= workload.output_len.max_len) {
      return Invalid(path, "max_total_len must exceed output_len.max");
    }
  }
  workload.num_pool_rows = static_cast<int>(workload.pool.size());
  if (const YAML::Node filter = root["filter"]) {
    RETURN_IF_ERROR(
        CheckKeys(filter, {"drop_if_both_below", "drop_if_total_at_least"}, path, "filter"));
    if (!workload.is_pool())
      return Invalid(path, "filter applies to a pool (lengths_csv, texts_jsonl)");
    int both_below = 0;
    int total_at_least = 0;
    if (filter["drop_if_both_below"]) {
      ASSIGN_OR_RETURN(both_below, IntKey(filter, "drop_if_both_below", path, "filter"));
    }
    if (filter["drop_if_total_at_least"]) {
      ASSIGN_OR_RETURN(total_at_least, IntKey(filter, "drop_if_total_at_least", path, "filter"));
    }
    std::erase_if(workload.pool, [&](const WorkloadItem& item) {
      return (item.input_len < both_below && item.output_len < both_below) ||
             (total_at_least > 0 && item.input_len + item.output_len >= total_at_least);
    });
    workload.num_filtered = workload.num_pool_rows - static_cast<int>(workload.pool.size());
    if (workload.pool.empty()) return Invalid(path, "the filter leaves no request");
  }
  return workload;
}

}  // namespace

absl::StatusOr<LengthRange> ParseLengthRange(absl::string_view text) {
  const std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  LengthRange range;
  bool ok = false;
  if (parts.size() == 1) {
    ok = absl::SimpleAtoi(parts[0], &range.min_len);
    range.max_len = range.min_len;
  } else if (parts.size() == 2) {
    ok = absl::SimpleAtoi(parts[0], &range.min_len) && absl::SimpleAtoi(parts[1], &range.max_len);
  }
  if (!ok || range.min_len < 1 || range.min_len > range.max_len) {
    return absl::InvalidArgumentError(
        absl::StrCat("length '", text, "': expected N or MIN:MAX with 1 <= MIN <= MAX"));
  }
  return range;
}

absl::StatusOr<WorkloadDefinition> LoadWorkloadDefinition(const std::filesystem::path& path,
                                                          const runtime::Tokenizer* tokenizer) {
  ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  try {
    return ParseWorkload(YAML::Load(text), path, tokenizer);
  } catch (const YAML::Exception& e) {
    return Invalid(path, e.what());
  }
}

WorkloadDefinition MakeRandomWorkload(LengthRange input_len, LengthRange output_len) {
  WorkloadDefinition workload;
  workload.name = "random";
  workload.description =
      absl::StrCat("uniform input lengths [", input_len.min_len, ", ", input_len.max_len,
                   "], output lengths [", output_len.min_len, ", ", output_len.max_len, "]");
  workload.input_len = input_len;
  workload.output_len = output_len;
  return workload;
}

std::string ContextFitReport::ToString() const {
  if (num_pool_dropped > 0 || num_pool_kept > 0) {
    return absl::StrCat(num_pool_dropped, " of ", num_pool_dropped + num_pool_kept,
                        " pool entries dropped (input + output > max_model_len ", max_model_len,
                        ")");
  }
  return inputs_clipped
             ? absl::StrCat("inputs clipped to max_model_len ", max_model_len, " - output_len")
             : absl::StrCat("every request fits max_model_len ", max_model_len);
}

absl::StatusOr<ContextFitReport> FitToContext(WorkloadDefinition& workload, int max_model_len) {
  ContextFitReport report{.max_model_len = max_model_len};
  if (workload.is_pool()) {
    const size_t before = workload.pool.size();
    std::erase_if(workload.pool, [&](const WorkloadItem& item) {
      return item.input_len + item.output_len > max_model_len;
    });
    report.num_pool_kept = static_cast<int>(workload.pool.size());
    report.num_pool_dropped = static_cast<int>(before) - report.num_pool_kept;
    if (workload.pool.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "workload ", workload.name, ": no request fits max_model_len ", max_model_len));
    }
    return report;
  }
  if (workload.output_len.max_len >= max_model_len) {
    return absl::InvalidArgumentError(
        absl::StrCat("workload ", workload.name, ": output_len up to ", workload.output_len.max_len,
                     " leaves no room for a prompt in max_model_len ", max_model_len));
  }
  // Clipping that the workload's own max_total_len does is its definition, not a context fit.
  const int own_limit = workload.max_total_len == 0 ? INT_MAX : workload.max_total_len;
  report.inputs_clipped = max_model_len < own_limit &&
                          workload.input_len.max_len + workload.output_len.max_len > max_model_len;
  workload.max_total_len = std::min(own_limit, max_model_len);
  return report;
}

std::vector<WorkloadItem> SampleWorkload(const WorkloadDefinition& workload, int num_requests,
                                         Rng& rng) {
  std::vector<WorkloadItem> items;
  items.reserve(std::max(num_requests, 0));
  for (int i = 0; i < num_requests; ++i) {
    if (workload.is_pool()) {
      items.push_back(
          workload.pool[rng.UniformInt(0, static_cast<int64_t>(workload.pool.size()) - 1)]);
      continue;
    }
    WorkloadItem item;
    item.input_len =
        static_cast<int>(rng.UniformInt(workload.input_len.min_len, workload.input_len.max_len));
    item.output_len =
        static_cast<int>(rng.UniformInt(workload.output_len.min_len, workload.output_len.max_len));
    if (workload.max_total_len > 0) {
      item.input_len =
          std::max(1, std::min(item.input_len, workload.max_total_len - item.output_len));
    }
    items.push_back(std::move(item));
  }
  return items;
}

absl::StatusOr<std::filesystem::path> NamedWorkloadFile(absl::string_view name,
                                                        const std::filesystem::path& workload_dir) {
  std::filesystem::path file = workload_dir / absl::StrCat(name, ".yaml");
  if (!std::filesystem::exists(file)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--workload ", name, ": expected chatbot, code, summarization, random or trace:FILE (no ",
                     file.string(), ")"));
  }
  return file;
}

}  // namespace baton::bench
