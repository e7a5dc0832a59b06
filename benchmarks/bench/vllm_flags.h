// vLLM's benchmark spellings (`vllm bench serve`, benchmarks/benchmark_serving.py) that `baton bench`
// also accepts, turned into its own settings: --dataset-name into a --workload, --goodput KEY:MS
// pairs into the TTFT/TPOT SLOs, and --backend/--endpoint into the OpenAI endpoint's URL. (The
// plain renames, --request-rate and --num-prompts, are second names of --rate and --num-requests in
// cli's option table.) Pure functions; every error is InvalidArgument naming the flag and the
// accepted values.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace baton::bench {

// --dataset-name: "sharegpt" is the chatbot workload (ShareGPT's request lengths), "random" the
// random one, "prefix_repetition" the shared-prefix one (prefix_workloads.h). vLLM's other datasets (sonnet, burstgpt, hf, custom, ...) have no counterpart here.
absl::StatusOr<std::string> WorkloadOfDataset(absl::string_view dataset_name);

struct GoodputSlo {
  double ttft_ms = 0;
  double tpot_ms = 0;
};

// --goodput ttft:MS tpot:MS (vLLM's "KEY:VALUE" objectives, milliseconds). Both keys are needed
// (Baton's attainment counts the requests that meet both); vLLM's e2el is refused, this bench has
// no end-to-end latency objective.
absl::StatusOr<GoodputSlo> ParseGoodput(const std::vector<std::string>& items);

// The OpenAI URL that --backend and --endpoint (vLLM's) make of `url` (--openai-url/--base-url;
// empty: vLLM's default http://127.0.0.1:8000). backend: empty, "openai" or "vllm" (the
// completions API) or "openai-chat" (the chat API; its default endpoint /v1/chat/completions).
// endpoint: empty (the URL's own, or the backend's) or a path ending in /completions, appended to
// the URL less any /v1[/chat]/completions or /v1 it ends in.
absl::StatusOr<std::string> OpenAiUrlOf(const std::string& url, const std::string& backend,
                                        const std::string& endpoint);

}  // namespace baton::bench
