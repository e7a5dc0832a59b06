#include "benchmarks/bench/prompt_corpus.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "kernels/common/check.h"

namespace baton::bench {

absl::StatusOr<std::unique_ptr<PromptCorpus>> PromptCorpus::Create(
    const runtime::Tokenizer& tokenizer, const std::filesystem::path& source) {
  std::error_code ec;
  std::vector<std::filesystem::path> files;
  if (std::filesystem::is_directory(source, ec)) {
    for (const auto& entry : std::filesystem::directory_iterator(source, ec)) {
      if (entry.is_regular_file() && !entry.is_symlink()) files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
  } else if (std::filesystem::is_regular_file(source, ec)) {
    files.push_back(source);
  } else {
    return absl::NotFoundError(absl::StrCat("prompt corpus ", source.string(), " not found"));
  }
  std::vector<int32_t> stream;
  for (const std::filesystem::path& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", file.string()));
    std::stringstream text;
    text << in.rdbuf();
    const std::vector<int32_t> ids = tokenizer.Encode(text.str(), /*add_special_tokens=*/false);
    stream.insert(stream.end(), ids.begin(), ids.end());
  }
  constexpr size_t kMinTokens = 1024;
  if (stream.size() < kMinTokens) {
    return absl::InvalidArgumentError(absl::StrCat("prompt corpus ", source.string(), " has only ",
                                                   stream.size(), " tokens; need ", kMinTokens));
  }
  const auto prefix = tokenizer.prefix_special_ids();
  return std::make_unique<PromptCorpus>(std::move(stream),
                                        std::vector<int32_t>(prefix.begin(), prefix.end()));
}

PromptCorpus::PromptCorpus(std::vector<int32_t> stream_ids, std::vector<int32_t> prefix_ids)
    : stream_ids_(std::move(stream_ids)), prefix_ids_(std::move(prefix_ids)) {
  BATON_CHECK(!stream_ids_.empty());
}

std::vector<int32_t> PromptCorpus::Continue(int num_tokens, Rng& rng) const {
  BATON_CHECK(num_tokens >= 0);
  std::vector<int32_t> ids;
  ids.reserve(num_tokens);
  size_t offset = static_cast<size_t>(rng.UniformInt(0, static_cast<int64_t>(stream_ids_.size()) - 1));
  while (static_cast<int>(ids.size()) < num_tokens) {
    ids.push_back(stream_ids_[offset]);
    offset = (offset + 1) % stream_ids_.size();
  }
  return ids;
}

std::vector<int32_t> PromptCorpus::Build(int num_tokens, Rng& rng) const {
  BATON_CHECK(num_tokens >= 1);
  std::vector<int32_t> ids;
  ids.reserve(num_tokens);
  for (size_t i = 0; i < prefix_ids_.size() && static_cast<int>(ids.size()) < num_tokens; ++i) {
    ids.push_back(prefix_ids_[i]);
  }
  size_t offset =
      static_cast<size_t>(rng.UniformInt(0, static_cast<int64_t>(stream_ids_.size()) - 1));
  while (static_cast<int>(ids.size()) < num_tokens) {
    ids.push_back(stream_ids_[offset]);
    offset = (offset + 1) % stream_ids_.size();
  }
  return ids;
}

}  // namespace baton::bench
