#include "runtime/tokenizer/decoder.h"

#include <optional>

#include "absl/strings/str_join.h"
#include "kernels/common/status_macros.h"
#include "nlohmann/json.hpp"
#include "runtime/tokenizer/byte_level.h"
#include "runtime/tokenizer/utf8.h"

namespace baton::runtime {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The byte a "<0xNN>" token stands for (two hex digits, or "+" and one, as Rust's from_str_radix
// accepts), or nullopt for any other token.
std::optional<uint8_t> ByteOfFallbackToken(const std::string& token) {
  if (token.size() != 6 || !token.starts_with("<0x") || token[5] != '>') return std::nullopt;
  const int high = token[3] == '+' ? 0 : HexValue(token[3]);
  const int low = HexValue(token[4]);
  if (high < 0 || low < 0) return std::nullopt;
  return static_cast<uint8_t>(high * 16 + low);
}

// ByteLevel: every token's characters back to bytes (a token with a character outside the table
// keeps its UTF-8 bytes), then one lossy UTF-8 decode of all bytes. Returns a single token.
std::vector<std::string> DecodeByteLevel(const std::vector<std::string>& tokens,
                                         bool* ends_mid_char) {
  std::string bytes;
  for (const std::string& token : tokens) {
    if (!byte_level::AppendDecoded(token, &bytes)) bytes.append(token);
  }
  std::string text;
  *ends_mid_char = utf8::AppendLossy(bytes, &text);
  return {std::move(text)};
}

// ByteFallback: each run of <0xNN> tokens becomes its UTF-8 text if the run is valid UTF-8, else
// one U+FFFD per byte.
std::vector<std::string> DecodeByteFallback(std::vector<std::string> tokens, bool* ends_mid_char) {
  std::vector<std::string> out;
  out.reserve(tokens.size());
  std::string run;
  const auto flush = [&](bool at_end) {
    if (run.empty()) return;
    if (utf8::IsValid(run)) {
      out.push_back(std::move(run));
    } else {
      if (at_end) {
        // Later byte tokens could still make the run valid only if its sole flaw is a
        // truncated last character.
        bool only_truncated = false;
        size_t pos = 0;
        while (pos < run.size()) {
          const utf8::Sequence seq = utf8::ScanSequence(run, pos);
          only_truncated = seq.kind == utf8::SequenceKind::kTruncated;
          if (seq.kind == utf8::SequenceKind::kInvalid) break;
          pos += seq.num_bytes;
        }
        *ends_mid_char = only_truncated;
      }
      for (size_t i = 0; i < run.size(); ++i) out.emplace_back(utf8::kReplacementChar);
    }
    run.clear();
  };
  for (std::string& token : tokens) {
    if (const std::optional<uint8_t> byte = ByteOfFallbackToken(token)) {
      run.push_back(static_cast<char>(*byte));
      continue;
    }
    flush(/*at_end=*/false);
    out.push_back(std::move(token));
  }
  flush(/*at_end=*/true);
  return out;
}

std::string StripChars(const std::string& token, const std::string& content, size_t start,
                       size_t stop) {
  // Split into characters, as tokenizers' Strip works on chars.
  std::vector<std::string_view> chars;
  size_t pos = 0;
  while (pos < token.size()) {
    const size_t begin = pos;
    pos += utf8::CharLength(static_cast<uint8_t>(token[pos]));
    chars.push_back(std::string_view(token).substr(begin, pos - begin));
  }
  size_t start_cut = 0;
  for (size_t i = 0; i < start && i < chars.size() && chars[i] == content; ++i) start_cut = i + 1;
  size_t stop_cut = chars.size();
  for (size_t i = 0; i < stop && i < chars.size(); ++i) {
    const size_t index = chars.size() - i - 1;
    if (chars[index] != content) break;
    stop_cut = index;
  }
  std::string out;
  for (size_t i = start_cut; i < stop_cut; ++i) out.append(chars[i]);
  return out;
}

}  // namespace

absl::StatusOr<Decoder> Decoder::FromJson(const nlohmann::json& json, const JsonPath& at) {
  Decoder decoder;
  if (json.is_null()) return decoder;
  decoder.has_decoder_ = true;
  RETURN_IF_ERROR(AppendSteps(json, at, &decoder.steps_));
  return decoder;
}

absl::Status Decoder::AppendSteps(const nlohmann::json& json, const JsonPath& at,
                                  std::vector<Step>* steps) {
  ASSIGN_OR_RETURN(const std::string type, ReadString(json, "type", at));
  if (type == "Sequence") {
    const nlohmann::json* children = FindField(json, "decoders");
    if (children == nullptr || !children->is_array()) {
      return at.Child("decoders").Invalid("expected an array");
    }
    for (size_t i = 0; i < children->size(); ++i) {
      RETURN_IF_ERROR(AppendSteps((*children)[i], at.Child("decoders").Index(i), steps));
    }
  } else if (type == "ByteLevel") {
    steps->push_back(ByteLevel{});
  } else if (type == "Replace") {
    ASSIGN_OR_RETURN(ReplaceStep replace, ParseReplaceStep(json, at));
    steps->push_back(std::move(replace));
  } else if (type == "ByteFallback") {
    steps->push_back(ByteFallback{});
  } else if (type == "Fuse") {
    steps->push_back(Fuse{});
  } else if (type == "Strip") {
    ASSIGN_OR_RETURN(std::string content, ReadString(json, "content", " ", at));
    ASSIGN_OR_RETURN(const int64_t start, ReadInt(json, "start", 0, at));
    ASSIGN_OR_RETURN(const int64_t stop, ReadInt(json, "stop", 0, at));
    if (start < 0 || stop < 0) return at.Invalid("start and stop must be >= 0");
    steps->push_back(Strip{std::move(content), static_cast<size_t>(start),
                           static_cast<size_t>(stop)});
  } else if (type == "Metaspace") {
    ASSIGN_OR_RETURN(std::string replacement,
                     ReadString(json, "replacement", "\xE2\x96\x81", at));
    bool strip_first = true;
    if (const nlohmann::json* scheme = FindField(json, "prepend_scheme")) {
      strip_first = !(scheme->is_string() && scheme->get<std::string>() == "never");
    } else {
      ASSIGN_OR_RETURN(strip_first, ReadBool(json, "add_prefix_space", true, at));
    }
    steps->push_back(Metaspace{std::move(replacement), strip_first});
  } else {
    return at.Child("type").Unsupported("decoder type \"" + type + "\" is not supported");
  }
  return absl::OkStatus();
}

DecodedText Decoder::Decode(std::vector<std::string> tokens) const {
  DecodedText result;
  if (!has_decoder_) {
    result.text = absl::StrJoin(tokens, " ");
    return result;
  }
  for (const Step& step : steps_) {
    if (std::holds_alternative<ByteLevel>(step)) {
      tokens = DecodeByteLevel(tokens, &result.ends_mid_char);
    } else if (const auto* replace = std::get_if<ReplaceStep>(&step)) {
      for (std::string& token : tokens) {
        token = replace->Apply(token);
      }
    } else if (std::holds_alternative<ByteFallback>(step)) {
      tokens = DecodeByteFallback(std::move(tokens), &result.ends_mid_char);
    } else if (std::holds_alternative<Fuse>(step)) {
      tokens = {absl::StrJoin(tokens, "")};
    } else if (const auto* strip = std::get_if<Strip>(&step)) {
      for (std::string& token : tokens) {
        token = StripChars(token, strip->content, strip->start, strip->stop);
      }
    } else if (const auto* metaspace = std::get_if<Metaspace>(&step)) {
      for (size_t i = 0; i < tokens.size(); ++i) {
        const bool drop = i == 0 && metaspace->strip_first;
        tokens[i] = ReplaceAll(tokens[i], Pattern::Literal(metaspace->replacement),
                               drop ? "" : " ");
      }
    }
  }
  result.text = absl::StrJoin(tokens, "");
  return result;
}

}  // namespace baton::runtime
