// Helpers for the tokenizer tests: small tokenizer.json documents built by the tests themselves.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/tokenizer/byte_level.h"
#include "runtime/tokenizer/tokenizer.h"
#include "runtime/tokenizer/utf8.h"

namespace baton::runtime::testing {

// The byte-level spelling of `bytes` (each byte as its GPT-2 table character).
inline std::string ByteLevelSpelling(std::string_view bytes) {
  std::string out;
  byte_level::AppendEncoded(bytes, &out);
  return out;
}

// A vocab with the 256 byte-level characters as ids 0..255 (id == byte value).
inline nlohmann::json ByteLevelVocab() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int byte = 0; byte < 256; ++byte) {
    vocab[ByteLevelSpelling(std::string(1, static_cast<char>(byte)))] = byte;
  }
  return vocab;
}

// Adds merges (in rank order) of byte-level spelled parts to `model`, giving each merged token the
// next free id.
inline void AddByteLevelMerges(nlohmann::json& model,
                               const std::vector<std::pair<std::string, std::string>>& merges) {
  for (const auto& [left, right] : merges) {
    const std::string l = ByteLevelSpelling(left);
    const std::string r = ByteLevelSpelling(right);
    model["merges"].push_back(nlohmann::json::array({l, r}));
    if (!model["vocab"].contains(l + r)) {
      model["vocab"][l + r] = static_cast<int>(model["vocab"].size());
    }
  }
}

inline std::unique_ptr<Tokenizer> LoadTokenizer(const nlohmann::json& tokenizer_json,
                                                std::string_view config_json = "") {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      Tokenizer::FromJsonText(tokenizer_json.dump(), config_json, "test/tokenizer.json");
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
}

// A GPT-2-style tokenizer: ByteLevel pre-tokenizer with the GPT-2 regex, ByteLevel decoder, a few
// merges and one special token "<|endoftext|>" (id 300).
inline nlohmann::json Gpt2StyleJson() {
  nlohmann::json model = {{"type", "BPE"}, {"vocab", ByteLevelVocab()},
                          {"merges", nlohmann::json::array()}};
  // "hello" needs "h ello" to outrank "h e", which " the" uses.
  AddByteLevelMerges(model, {{" ", "t"}, {"l", "l"}, {"ll", "o"}, {"e", "llo"}, {"h", "ello"},
                             {"h", "e"}, {" t", "he"}});
  return {
      {"version", "1.0"},
      {"added_tokens",
       {{{"id", 300}, {"content", "<|endoftext|>"}, {"special", true}, {"normalized", false}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", model},
  };
}

// A Llama-2-style SentencePiece BPE: <unk>=0, <s>=1, </s>=2, <0x00>..<0xFF> = 3..258, then
// "▁", letters and a few merges; Prepend/Replace normalizer, byte-fallback decoder chain, and a
// template adding <s>.
inline nlohmann::json SentencePieceStyleJson() {
  nlohmann::json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  for (int byte = 0; byte < 256; ++byte) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", byte);
    vocab[name] = 3 + byte;
  }
  int next_id = 259;
  for (std::string piece : {"\xE2\x96\x81", "a", "b", "c", "d", "e", "h", "l", "o", "r", "w"}) {
    vocab[piece] = next_id++;
  }
  nlohmann::json merges = nlohmann::json::array();
  for (auto [left, right] : std::vector<std::pair<std::string, std::string>>{
           {"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {"\xE2\x96\x81", "hello"},
           {"o", "r"}, {"w", "or"}, {"\xE2\x96\x81", "wor"}}) {
    merges.push_back(left + " " + right);
    if (!vocab.contains(left + right)) vocab[left + right] = next_id++;
  }
  const std::string kSpace = "\xE2\x96\x81";
  return {
      {"version", "1.0"},
      {"added_tokens",
       {{{"id", 0}, {"content", "<unk>"}, {"special", true}, {"normalized", false}},
        {{"id", 1}, {"content", "<s>"}, {"special", true}, {"normalized", false}},
        {{"id", 2}, {"content", "</s>"}, {"special", true}, {"normalized", false}}}},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         {{{"type", "Prepend"}, {"prepend", kSpace}},
          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpace}}}}}},
      {"pre_tokenizer", nullptr},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single",
         {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"pair", nlohmann::json::array()},
        {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", nlohmann::json::array({1})}, {"tokens", nlohmann::json::array({"<s>"})}}}}}}},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders",
         {{{"type", "Replace"}, {"pattern", {{"String", kSpace}}}, {"content", " "}},
          {{"type", "ByteFallback"}},
          {{"type", "Fuse"}},
          {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
      {"model",
       {{"type", "BPE"},
        {"vocab", vocab},
        {"merges", merges},
        {"unk_token", "<unk>"},
        {"fuse_unk", true},
        {"byte_fallback", true}}},
  };
}

}  // namespace baton::runtime::testing
