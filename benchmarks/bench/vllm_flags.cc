#include "benchmarks/bench/vllm_flags.h"

#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace baton::bench {

absl::StatusOr<std::string> WorkloadOfDataset(absl::string_view dataset_name) {
  if (dataset_name == "sharegpt") return std::string("chatbot");
  if (dataset_name == "random") return std::string("random");
  if (dataset_name == "prefix_repetition") return std::string("shared-prefix");
  return absl::InvalidArgumentError(absl::StrCat(
      "--dataset-name '", dataset_name, "': expected sharegpt (= --workload chatbot), random "
      "(= --workload random) or prefix_repetition (= --workload shared-prefix); --workload also has "
      "code, summarization and trace:FILE"));
}

absl::StatusOr<GoodputSlo> ParseGoodput(const std::vector<std::string>& items) {
  std::optional<double> ttft_ms;
  std::optional<double> tpot_ms;
  for (const std::string& item : items) {
    const size_t colon = item.find(':');
    const absl::string_view key = absl::string_view(item).substr(0, colon);
    double value = 0;
    if (colon == std::string::npos ||
        !absl::SimpleAtod(absl::string_view(item).substr(colon + 1), &value)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--goodput '", item, "': expected KEY:MS with KEY ttft or tpot (e.g. ttft:500 tpot:50)"));
    }
    if (key == "e2el") {
      return absl::InvalidArgumentError(
          "--goodput e2el: not supported; baton bench has objectives on TTFT and TPOT only "
          "(--goodput ttft:MS tpot:MS)");
    }
    std::optional<double>* slot = key == "ttft" ? &ttft_ms : key == "tpot" ? &tpot_ms : nullptr;
    if (slot == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("--goodput '", item, "': unknown objective '", key, "' (expected ttft or tpot)"));
    }
    if (slot->has_value()) {
      return absl::InvalidArgumentError(absl::StrCat("--goodput: ", key, " given twice"));
    }
    if (!std::isfinite(value) || value <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--goodput '", item, "': milliseconds must be > 0"));
    }
    *slot = value;
  }
  if (!ttft_ms || !tpot_ms) {
    return absl::InvalidArgumentError(
        "--goodput needs both ttft:MS and tpot:MS (attainment counts the requests meeting both)");
  }
  return GoodputSlo{.ttft_ms = *ttft_ms, .tpot_ms = *tpot_ms};
}

absl::StatusOr<std::string> OpenAiUrlOf(const std::string& url, const std::string& backend,
                                        const std::string& endpoint) {
  const bool chat_backend = backend == "openai-chat";
  if (!backend.empty() && !chat_backend && backend != "openai" && backend != "vllm") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--backend '", backend, "': expected openai, vllm (both /v1/completions) or openai-chat "
        "(/v1/chat/completions); baton bench speaks the OpenAI API, or Baton's gRPC with --server"));
  }
  if (!endpoint.empty() && (!absl::StartsWith(endpoint, "/") || !absl::EndsWith(endpoint, "/completions"))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--endpoint '", endpoint, "': expected a path such as /v1/completions or /v1/chat/completions"));
  }
  absl::string_view base = url.empty() ? absl::string_view("http://127.0.0.1:8000") : url;
  while (absl::ConsumeSuffix(&base, "/")) {}
  std::string result;
  if (!endpoint.empty()) {
    if (!absl::ConsumeSuffix(&base, "/v1/chat/completions") &&
        !absl::ConsumeSuffix(&base, "/v1/completions")) {
      absl::ConsumeSuffix(&base, "/v1");
    }
    result = absl::StrCat(base, endpoint);
  } else if (chat_backend && !absl::EndsWith(base, "/completions")) {
    absl::ConsumeSuffix(&base, "/v1");
    result = absl::StrCat(base, "/v1/chat/completions");
  } else {
    result = std::string(base);
  }
  const bool chat = absl::EndsWith(result, "/chat/completions");
  if (chat_backend && !chat) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--backend openai-chat: the endpoint (", result, ") must end in /chat/completions"));
  }
  if (!backend.empty() && !chat_backend && chat) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--backend ", backend, " speaks /v1/completions; for ", result, " use --backend openai-chat"));
  }
  return result;
}

}  // namespace baton::bench
