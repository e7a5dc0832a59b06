// A Hugging Face tokenizer.json, loaded natively: BPE models, byte-level (GPT-2, Llama-3, Qwen2) and
// SentencePiece-style (Llama-2, Mistral, TinyLlama: Prepend/Replace or Metaspace, byte_fallback).
//
// Encode(text, add_special_tokens) returns what `tokenizers`' encode(text).ids returns, and
// Decode(ids, skip_special_tokens) what its decode returns: added tokens are split out first
// (leftmost-longest), the rest is normalized, pre-tokenized and BPE-merged, and the post-processor's
// special tokens go around it. Not supported (load fails with Unimplemented naming the field):
// WordPiece/Unigram/WordLevel models and the normalizers, pre-tokenizers, post-processors and
// decoders listed as unsupported in their headers. "truncation" and "padding" are ignored.
// Parity is with `tokenizers` 0.23: an added token whose content the model vocab has takes the
// model's id, and a normalized added token decodes from its normalized form. Regexes run on PCRE2
// (see regex.h for the one known difference with Oniguruma).
//
// tokenizer_config.json beside tokenizer.json, when present, names the BOS and EOS tokens, and its
// add_bos_token / add_eos_token (when present) decide whether Encode(.., true) puts BOS in front
// of / EOS behind the text, as transformers' Llama tokenizers do; otherwise the post-processor
// decides alone.
//
// Immutable after loading; every const method is thread-safe (an internal word cache is locked).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/tokenizer/decoded_text.h"

namespace baton::runtime {

class AddedVocabulary;
class BpeModel;
class Decoder;
class JsonPath;
class Normalizer;
class PostProcessor;
class PreTokenizer;

class Tokenizer {
 public:
  // Loads `tokenizer_json` and, if it exists, tokenizer_config.json in the same directory.
  // NotFound if the file is missing; InvalidArgument (naming the file and the field) for malformed
  // JSON or content; Unimplemented for a model or component type this loader does not support.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromFile(
      const std::filesystem::path& tokenizer_json);

  // The same from file contents. `tokenizer_config_json` may be empty (no config). `source` names
  // the tokenizer.json in error messages.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromJsonText(
      std::string_view tokenizer_json, std::string_view tokenizer_config_json,
      std::string_view source);

  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Invalid UTF-8 in `text` is read as if each invalid sequence were U+FFFD.
  std::vector<int32_t> Encode(std::string_view text, bool add_special_tokens) const;

  // Ids outside the vocabulary are skipped; so are special tokens if skip_special_tokens.
  std::string Decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

  // Decode, plus whether the text ends in the middle of a character that later ids may complete.
  // For IncrementalDetokenizer.
  DecodedText DecodeChunk(std::span<const int32_t> ids, bool skip_special_tokens) const;

  // One past the largest token id (model vocab and added tokens): every id is in [0, vocab_size).
  int32_t vocab_size() const { return vocab_size_; }
  // From tokenizer_config.json; without one, the post-processor's first special token (BOS) and
  // its last (EOS), else for EOS the first of "</s>", "<|end_of_text|>", "<|endoftext|>", "<eos>"
  // that is a special added token.
  std::optional<int32_t> bos_id() const { return bos_id_; }
  std::optional<int32_t> eos_id() const { return eos_id_; }

  // Added tokens first, then the model vocab; nullopt if unknown.
  std::optional<int32_t> TokenToId(std::string_view token) const;
  // The token's string as decoding sees it (byte-level or "▁" spelling; a normalized added token
  // in its normalized form); nullopt for an unknown id.
  std::optional<std::string_view> IdToToken(int32_t id) const;
  // Whether `id` is an added token marked special (skipped by skip_special_tokens).
  bool IsSpecial(int32_t id) const;
  // Ids that Encode(.., true) puts before and after the text.
  std::span<const int32_t> prefix_special_ids() const;
  std::span<const int32_t> suffix_special_ids() const;

 private:
  Tokenizer();

  // Splits one stretch between raw added tokens: normalize, split on normalized added tokens,
  // pre-tokenize, BPE. Appends to *ids.
  void EncodeStretch(std::string_view text, bool at_origin, std::vector<int32_t>* ids) const;
  // The id -> token table over model and added tokens; checks the post-processor's ids.
  absl::Status BuildTokenTable(const JsonPath& at);
  // BOS/EOS without a tokenizer_config.json (see bos_id()).
  void SetDefaultBosEos();
  // Applies a tokenizer_config.json: BOS/EOS names and add_bos_token/add_eos_token.
  absl::Status ApplyConfig(std::string_view config_json, const std::string& config_source);

  struct TokenEntry {
    const std::string* text = nullptr;  // nullptr: no token has this id
    bool special = false;
  };

  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<AddedVocabulary> added_vocabulary_;
  std::unique_ptr<PostProcessor> post_processor_;
  std::unique_ptr<Decoder> decoder_;
  std::vector<TokenEntry> tokens_;  // [vocab_size]
  int32_t vocab_size_ = 0;
  std::optional<int32_t> bos_id_;
  std::optional<int32_t> eos_id_;
};

}  // namespace baton::runtime
