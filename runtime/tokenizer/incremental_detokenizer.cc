#include "runtime/tokenizer/incremental_detokenizer.h"

#include <algorithm>

#include "runtime/tokenizer/utf8.h"

namespace baton::runtime {
namespace {

// Length of the longest common prefix of a and b that ends on a character boundary of b.
size_t CommonPrefixLength(std::string_view a, std::string_view b) {
  size_t length = 0;
  const size_t limit = std::min(a.size(), b.size());
  while (length < limit && a[length] == b[length]) ++length;
  while (length > 0 && length < b.size() && (static_cast<uint8_t>(b[length]) & 0xC0) == 0x80) {
    --length;
  }
  return length;
}

}  // namespace

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer,
                                               bool skip_special_tokens,
                                               std::span<const int32_t> context_ids)
    : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {
  if (context_ids.empty()) return;
  // The last few context ids, more if their text ends mid-character (at most 3 more bytes).
  size_t first = context_ids.size() > kNumContextIds ? context_ids.size() - kNumContextIds : 0;
  DecodedText decoded = tokenizer_.DecodeChunk(context_ids.subspan(first), skip_special_tokens_);
  for (int extra = 0; decoded.ends_mid_char && first > 0 && extra < 3; ++extra) {
    --first;
    decoded = tokenizer_.DecodeChunk(context_ids.subspan(first), skip_special_tokens_);
  }
  window_.assign(context_ids.begin() + first, context_ids.end());
  num_read_ = window_.size();
  prefix_text_ = std::move(decoded.text);
}

std::string IncrementalDetokenizer::Step(int32_t id) {
  // Ids that Decode drops contribute nothing anywhere: keep them out of the window.
  if (id < 0 || id >= tokenizer_.vocab_size() || !tokenizer_.IdToToken(id).has_value() ||
      (skip_special_tokens_ && tokenizer_.IsSpecial(id))) {
    return {};
  }
  window_.push_back(id);
  return EmitNew(/*force=*/false);
}

std::string IncrementalDetokenizer::Flush() { return EmitNew(/*force=*/true); }

std::string IncrementalDetokenizer::EmitNew(bool force) {
  DecodedText decoded = tokenizer_.DecodeChunk(window_, skip_special_tokens_);
  if (decoded.ends_mid_char && !force) return {};
  std::string new_text;
  if (decoded.text.starts_with(prefix_text_)) {
    if (decoded.text.size() == prefix_text_.size()) return {};
    new_text = decoded.text.substr(prefix_text_.size());
  } else {
    // Only when a byte-fallback run turned invalid after part of it was emitted.
    new_text = decoded.text.substr(CommonPrefixLength(prefix_text_, decoded.text));
  }
  // The emitted ids stay in the window as left context for the next ones.
  window_.erase(window_.begin(), window_.begin() + static_cast<std::ptrdiff_t>(num_read_));
  num_read_ = window_.size();
  prefix_text_ = tokenizer_.DecodeChunk(window_, skip_special_tokens_).text;
  return new_text;
}

}  // namespace baton::runtime
