#include "runtime/tokenizer/added_vocabulary.h"

#include <algorithm>

#include "kernels/common/status_macros.h"
#include "nlohmann/json.hpp"
#include "runtime/tokenizer/absl_compat.h"
#include "runtime/tokenizer/unicode.h"
#include "runtime/tokenizer/utf8.h"

namespace baton::runtime {
namespace {

// Start of the last character of text[0, end). Pre-condition: end > 0.
size_t PreviousCharBegin(std::string_view text, size_t end) {
  size_t pos = end - 1;
  while (pos > 0 && (static_cast<uint8_t>(text[pos]) & 0xC0) == 0x80) --pos;
  return pos;
}

bool EndsWithWordChar(std::string_view text, size_t end) {
  if (end == 0) return false;
  size_t pos = PreviousCharBegin(text, end);
  return unicode::IsWordChar(utf8::DecodeAt(text, &pos));
}

bool StartsWithWordChar(std::string_view text, size_t begin) {
  if (begin >= text.size()) return false;
  return unicode::IsWordChar(utf8::DecodeAt(text, &begin));
}

// Start of the whitespace run that ends at `end`.
size_t WhitespaceRunBegin(std::string_view text, size_t end) {
  while (end > 0) {
    const size_t begin = PreviousCharBegin(text, end);
    size_t pos = begin;
    if (!unicode::IsWhitespace(utf8::DecodeAt(text, &pos))) break;
    end = begin;
  }
  return end;
}

// End of the whitespace run that starts at `begin`.
size_t WhitespaceRunEnd(std::string_view text, size_t begin) {
  while (begin < text.size()) {
    size_t pos = begin;
    if (!unicode::IsWhitespace(utf8::DecodeAt(text, &pos))) break;
    begin = pos;
  }
  return begin;
}

}  // namespace

void AddedVocabulary::Matcher::Add(std::string_view pattern, size_t token_index) {
  if (pattern.empty()) return;
  int32_t node = 0;
  for (char c : pattern) {
    const uint8_t byte = static_cast<uint8_t>(c);
    const auto it = nodes_[node].children.find(byte);
    if (it != nodes_[node].children.end()) {
      node = it->second;
      continue;
    }
    const int32_t child = static_cast<int32_t>(nodes_.size());
    nodes_[node].children[byte] = child;
    nodes_.emplace_back();
    node = child;
  }
  // The first token with a given content wins, as in tokenizers' content map.
  if (nodes_[node].token_index < 0) nodes_[node].token_index = static_cast<int64_t>(token_index);
  first_byte_[static_cast<uint8_t>(pattern[0])] = true;
}

std::pair<size_t, size_t> AddedVocabulary::Matcher::LongestAt(std::string_view text,
                                                              size_t pos) const {
  std::pair<size_t, size_t> best{0, 0};
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto it = nodes_[node].children.find(static_cast<uint8_t>(text[i]));
    if (it == nodes_[node].children.end()) break;
    node = it->second;
    if (nodes_[node].token_index >= 0) {
      best = {i + 1 - pos, static_cast<size_t>(nodes_[node].token_index)};
    }
  }
  return best;
}

std::vector<AddedSplit> AddedVocabulary::Matcher::Split(std::string_view text,
                                                        const AddedVocabulary& vocab) const {
  std::vector<AddedSplit> splits;
  size_t start_offset = 0;  // end of the last accepted split
  size_t pos = 0;           // where the search for the next match resumes
  const bool has_patterns = nodes_.size() > 1;
  while (has_patterns && pos < text.size()) {
    if (!first_byte_[static_cast<uint8_t>(text[pos])]) {
      ++pos;
      continue;
    }
    const auto [length, token_index] = LongestAt(text, pos);
    if (length == 0) {
      ++pos;
      continue;
    }
    size_t begin = pos;
    size_t end = pos + length;
    pos = end;  // matches never overlap, even a rejected one
    const AddedToken& token = vocab.tokens_[token_index];
    if (token.single_word &&
        (EndsWithWordChar(text, begin) || StartsWithWordChar(text, end))) {
      continue;
    }
    if (token.lstrip) begin = std::max(WhitespaceRunBegin(text, begin), start_offset);
    if (token.rstrip) end = WhitespaceRunEnd(text, end);
    if (start_offset < begin) splits.push_back({start_offset, begin, -1});
    splits.push_back({begin, end, token.id});
    start_offset = end;
  }
  if (start_offset < text.size()) splits.push_back({start_offset, text.size(), -1});
  return splits;
}

absl::StatusOr<AddedVocabulary> AddedVocabulary::FromJson(
    const nlohmann::json& json, const Normalizer& normalizer,
    const std::function<std::optional<int32_t>(std::string_view)>& model_id,
    const JsonPath& at) {
  AddedVocabulary vocab;
  if (json.is_null()) return vocab;
  if (!json.is_array()) return at.Invalid("expected an array");
  for (size_t i = 0; i < json.size(); ++i) {
    const nlohmann::json& entry = json[i];
    const JsonPath entry_at = at.Index(i);
    AddedToken token;
    const nlohmann::json* id = FindField(entry, "id");
    if (id == nullptr) return entry_at.Child("id").Invalid("missing");
    ASSIGN_OR_RETURN(token.id, ToTokenId(*id, entry_at.Child("id")));
    ASSIGN_OR_RETURN(token.content, ReadString(entry, "content", entry_at));
    if (!utf8::IsValid(token.content)) return entry_at.Child("content").Invalid("invalid UTF-8");
    ASSIGN_OR_RETURN(token.special, ReadBool(entry, "special", false, entry_at));
    ASSIGN_OR_RETURN(token.single_word, ReadBool(entry, "single_word", false, entry_at));
    ASSIGN_OR_RETURN(token.lstrip, ReadBool(entry, "lstrip", false, entry_at));
    ASSIGN_OR_RETURN(token.rstrip, ReadBool(entry, "rstrip", false, entry_at));
    ASSIGN_OR_RETURN(token.normalized, ReadBool(entry, "normalized", !token.special, entry_at));
    if (token.content.empty()) continue;  // tokenizers ignores empty added tokens
    if (const std::optional<int32_t> id_in_model = model_id(token.content)) token.id = *id_in_model;
    token.decode_text = token.normalized ? normalizer.Apply(token.content) : token.content;
    const size_t index = vocab.tokens_.size();
    vocab.index_by_id_.try_emplace(token.id, index);
    vocab.index_by_content_.try_emplace(token.content, index);
    vocab.tokens_.push_back(std::move(token));
  }
  // tokenizers matches special tokens first, then the others; on equal content the first wins.
  for (bool special : {true, false}) {
    for (size_t index = 0; index < vocab.tokens_.size(); ++index) {
      const AddedToken& token = vocab.tokens_[index];
      if (token.special != special) continue;
      if (token.normalized) {
        vocab.normalized_.Add(token.decode_text, index);
      } else {
        vocab.raw_.Add(token.content, index);
      }
    }
  }
  return vocab;
}

const AddedToken* AddedVocabulary::FindById(int32_t id) const {
  const auto it = index_by_id_.find(id);
  return it == index_by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedVocabulary::FindByContent(std::string_view content) const {
  const auto it = index_by_content_.find(ToAbsl(content));
  return it == index_by_content_.end() ? nullptr : &tokens_[it->second];
}

}  // namespace baton::runtime
