#include "runtime/tokenizer/tokenizer.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "runtime/tokenizer/added_vocabulary.h"
#include "runtime/tokenizer/bpe_model.h"
#include "runtime/tokenizer/decoder.h"
#include "runtime/tokenizer/json_fields.h"
#include "runtime/tokenizer/normalizer.h"
#include "runtime/tokenizer/post_processor.h"
#include "runtime/tokenizer/pre_tokenizer.h"
#include "runtime/tokenizer/tokenizer_config.h"
#include "runtime/tokenizer/utf8.h"

namespace baton::runtime {
namespace {

// Ids index dense tables; real vocabularies stay below 10^6.
constexpr int32_t kMaxVocabSize = int32_t{1} << 24;

absl::StatusOr<std::string> ReadFile(const std::filesystem::path& path) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) {
    return absl::NotFoundError(absl::StrCat(path.string(), ": no such file"));
  }
  std::ifstream stream(path, std::ios::binary);
  std::stringstream contents;
  contents << stream.rdbuf();
  if (!stream) return absl::NotFoundError(absl::StrCat(path.string(), ": cannot be read"));
  return contents.str();
}

// The BPE model, or why this "model" cannot be loaded.
absl::StatusOr<std::unique_ptr<BpeModel>> LoadModel(const nlohmann::json& root,
                                                    const JsonPath& at) {
  const nlohmann::json* model = FindField(root, "model");
  if (model == nullptr || !model->is_object()) return at.Invalid("missing (expected an object)");
  // Old files omit the type of a BPE model; it is the one with merges.
  const std::string default_type = FindField(*model, "merges") != nullptr ? "BPE" : "";
  ASSIGN_OR_RETURN(const std::string type, ReadString(*model, "type", default_type, at));
  if (type == "BPE") return BpeModel::FromJson(*model, at);
  if (type == "WordPiece" || type == "Unigram" || type == "WordLevel") {
    return at.Child("type").Unsupported("model type \"" + type + "\" is not supported (BPE only)");
  }
  return at.Child("type").Invalid("unknown model type \"" + type + "\"");
}

const nlohmann::json& FieldOrNull(const nlohmann::json& root, std::string_view key) {
  static const nlohmann::json* const kNull = new nlohmann::json(nullptr);
  const nlohmann::json* value = FindField(root, key);
  return value != nullptr ? *value : *kNull;
}

}  // namespace

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromFile(
    const std::filesystem::path& tokenizer_json) {
  ASSIGN_OR_RETURN(const std::string text, ReadFile(tokenizer_json));
  const std::filesystem::path config_path =
      tokenizer_json.parent_path() / "tokenizer_config.json";
  std::string config_text;
  std::error_code error;
  if (std::filesystem::is_regular_file(config_path, error)) {
    ASSIGN_OR_RETURN(config_text, ReadFile(config_path));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer,
                   FromJsonText(text, "", tokenizer_json.string()));
  if (!config_text.empty()) RETURN_IF_ERROR(tokenizer->ApplyConfig(config_text, config_path.string()));
  return tokenizer;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromJsonText(
    std::string_view tokenizer_json, std::string_view tokenizer_config_json,
    std::string_view source) {
  ASSIGN_OR_RETURN(const nlohmann::json root, ParseJson(tokenizer_json, source));
  const JsonPath at{std::string(source)};
  if (!root.is_object()) return at.Invalid("expected a JSON object");
  std::unique_ptr<Tokenizer> tokenizer(new Tokenizer());

  ASSIGN_OR_RETURN(Normalizer normalizer,
                   Normalizer::FromJson(FieldOrNull(root, "normalizer"), at.Child("normalizer")));
  tokenizer->normalizer_ = std::make_unique<Normalizer>(std::move(normalizer));
  ASSIGN_OR_RETURN(PreTokenizer pre_tokenizer,
                   PreTokenizer::FromJson(FieldOrNull(root, "pre_tokenizer"),
                                          at.Child("pre_tokenizer")));
  tokenizer->pre_tokenizer_ = std::make_unique<PreTokenizer>(std::move(pre_tokenizer));
  ASSIGN_OR_RETURN(tokenizer->model_, LoadModel(root, at.Child("model")));
  const BpeModel& model = *tokenizer->model_;
  ASSIGN_OR_RETURN(
      AddedVocabulary added,
      AddedVocabulary::FromJson(
          FieldOrNull(root, "added_tokens"), *tokenizer->normalizer_,
          [&model](std::string_view content) { return model.TokenToId(content); },
          at.Child("added_tokens")));
  tokenizer->added_vocabulary_ = std::make_unique<AddedVocabulary>(std::move(added));
  ASSIGN_OR_RETURN(PostProcessor post_processor,
                   PostProcessor::FromJson(FieldOrNull(root, "post_processor"),
                                           at.Child("post_processor")));
  tokenizer->post_processor_ = std::make_unique<PostProcessor>(std::move(post_processor));
  ASSIGN_OR_RETURN(Decoder decoder,
                   Decoder::FromJson(FieldOrNull(root, "decoder"), at.Child("decoder")));
  tokenizer->decoder_ = std::make_unique<Decoder>(std::move(decoder));

  RETURN_IF_ERROR(tokenizer->BuildTokenTable(at));
  tokenizer->SetDefaultBosEos();
  if (!tokenizer_config_json.empty()) {
    RETURN_IF_ERROR(tokenizer->ApplyConfig(tokenizer_config_json, "tokenizer_config.json"));
  }
  return tokenizer;
}

absl::Status Tokenizer::BuildTokenTable(const JsonPath& at) {
  int32_t vocab_size = model_->id_limit();
  for (const AddedToken& token : added_vocabulary_->tokens()) {
    vocab_size = std::max(vocab_size, token.id + 1);
  }
  if (vocab_size > kMaxVocabSize) {
    return at.Child("added_tokens")
        .Invalid(absl::StrCat("token id ", vocab_size - 1, " is too large (limit ", kMaxVocabSize,
                              ")"));
  }
  vocab_size_ = vocab_size;
  tokens_.resize(vocab_size);
  for (int32_t id = 0; id < model_->id_limit(); ++id) tokens_[id].text = model_->IdToToken(id);
  // Added tokens take precedence over the model's spelling of the same id.
  for (const AddedToken& token : added_vocabulary_->tokens()) {
    if (added_vocabulary_->FindById(token.id) != &token) continue;  // the first entry stands
    tokens_[token.id] = {&token.decode_text, token.special};
  }
  for (const std::vector<int32_t>* ids :
       {&post_processor_->prefix_ids(), &post_processor_->suffix_ids()}) {
    for (const int32_t id : *ids) {
      if (id >= vocab_size || tokens_[id].text == nullptr) {
        return at.Child("post_processor")
            .Invalid(absl::StrCat("special token id ", id, " is not in the vocabulary"));
      }
    }
  }
  return absl::OkStatus();
}

void Tokenizer::SetDefaultBosEos() {
  const std::vector<int32_t>& prefix = post_processor_->prefix_ids();
  const std::vector<int32_t>& suffix = post_processor_->suffix_ids();
  if (!prefix.empty() && IsSpecial(prefix.front())) bos_id_ = prefix.front();
  if (!suffix.empty() && IsSpecial(suffix.back())) {
    eos_id_ = suffix.back();
    return;
  }
  for (std::string_view name : {"</s>", "<|end_of_text|>", "<|endoftext|>", "<eos>"}) {
    const AddedToken* token = added_vocabulary_->FindByContent(name);
    if (token != nullptr && token->special) {
      eos_id_ = token->id;
      return;
    }
  }
}

absl::Status Tokenizer::ApplyConfig(std::string_view config_json,
                                    const std::string& config_source) {
  ASSIGN_OR_RETURN(const TokenizerConfig config, ParseTokenizerConfig(config_json, config_source));
  const JsonPath at{config_source};
  const auto resolve = [&](const std::optional<std::string>& name,
                           std::string_view field) -> absl::StatusOr<std::optional<int32_t>> {
    if (!name.has_value()) return std::nullopt;
    const std::optional<int32_t> id = TokenToId(*name);
    if (!id) return at.Child(field).Invalid("token \"" + *name + "\" is not in the vocabulary");
    return id;
  };
  ASSIGN_OR_RETURN(const std::optional<int32_t> bos, resolve(config.bos_token, "bos_token"));
  ASSIGN_OR_RETURN(const std::optional<int32_t> eos, resolve(config.eos_token, "eos_token"));
  if (bos) bos_id_ = bos;
  if (eos) eos_id_ = eos;

  std::vector<int32_t> prefix = post_processor_->prefix_ids();
  std::vector<int32_t> suffix = post_processor_->suffix_ids();
  if (config.add_bos_token.has_value() && bos_id_.has_value()) {
    const bool has_bos = !prefix.empty() && prefix.front() == *bos_id_;
    if (*config.add_bos_token && !has_bos) prefix.insert(prefix.begin(), *bos_id_);
    if (!*config.add_bos_token && has_bos) prefix.erase(prefix.begin());
  }
  if (config.add_eos_token.has_value() && eos_id_.has_value()) {
    const bool has_eos = !suffix.empty() && suffix.back() == *eos_id_;
    if (*config.add_eos_token && !has_eos) suffix.push_back(*eos_id_);
    if (!*config.add_eos_token && has_eos) suffix.pop_back();
  }
  post_processor_ = std::make_unique<PostProcessor>(std::move(prefix), std::move(suffix));
  return absl::OkStatus();
}

void Tokenizer::EncodeStretch(std::string_view text, bool at_origin,
                              std::vector<int32_t>* ids) const {
  std::string normalized_storage;
  std::string_view normalized = text;
  if (!normalizer_->is_identity()) {
    normalized_storage = normalizer_->Apply(text);
    normalized = normalized_storage;
  }
  std::vector<std::string> words;
  for (const AddedSplit& split : added_vocabulary_->SplitNormalized(normalized)) {
    if (split.added_id >= 0) {
      ids->push_back(split.added_id);
      continue;
    }
    words.clear();
    pre_tokenizer_->Apply(normalized.substr(split.begin, split.end - split.begin),
                          at_origin && split.begin == 0, &words);
    for (const std::string& word : words) model_->Tokenize(word, ids);
  }
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_special_tokens) const {
  std::string repaired;
  if (!utf8::IsValid(text)) {
    utf8::AppendLossy(text, &repaired);
    text = repaired;
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 8);
  if (add_special_tokens) {
    ids.insert(ids.end(), post_processor_->prefix_ids().begin(),
               post_processor_->prefix_ids().end());
  }
  for (const AddedSplit& split : added_vocabulary_->SplitRaw(text)) {
    if (split.added_id >= 0) {
      ids.push_back(split.added_id);
    } else {
      EncodeStretch(text.substr(split.begin, split.end - split.begin), split.begin == 0, &ids);
    }
  }
  if (add_special_tokens) {
    ids.insert(ids.end(), post_processor_->suffix_ids().begin(),
               post_processor_->suffix_ids().end());
  }
  return ids;
}

DecodedText Tokenizer::DecodeChunk(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const int32_t id : ids) {
    if (id < 0 || id >= vocab_size_) continue;
    const TokenEntry& entry = tokens_[id];
    if (entry.text == nullptr || (skip_special_tokens && entry.special)) continue;
    tokens.push_back(*entry.text);
  }
  return decoder_->Decode(std::move(tokens));
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return DecodeChunk(ids, skip_special_tokens).text;
}

std::optional<int32_t> Tokenizer::TokenToId(std::string_view token) const {
  if (const AddedToken* added = added_vocabulary_->FindByContent(token)) return added->id;
  return model_->TokenToId(token);
}

std::optional<std::string_view> Tokenizer::IdToToken(int32_t id) const {
  if (id < 0 || id >= vocab_size_ || tokens_[id].text == nullptr) return std::nullopt;
  return *tokens_[id].text;
}

bool Tokenizer::IsSpecial(int32_t id) const {
  return id >= 0 && id < vocab_size_ && tokens_[id].special;
}

std::span<const int32_t> Tokenizer::prefix_special_ids() const {
  return post_processor_->prefix_ids();
}

std::span<const int32_t> Tokenizer::suffix_special_ids() const {
  return post_processor_->suffix_ids();
}

}  // namespace baton::runtime
