// Fuzz target: the tokenizer.json loader (Tokenizer::FromJsonText), with tokenizer_config.json, and
// the loaded tokenizer on a text.
//
// Input: tokenizer.json, then optionally a NUL byte and tokenizer_config.json, then optionally a NUL
// byte and a text (JSON holds no raw NUL, so the split is unambiguous). A tokenizer that loads is
// used the way serving uses it: Encode the text (with and without special tokens), Decode the ids
// back, look tokens up. The loader's contract is that whatever it accepts can be used: an id
// outside [0, vocab_size) from Encode is a bug, and the target aborts on it.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/tokenizer/tokenizer.h"

namespace {

using baton::runtime::Tokenizer;

// Splits off the text up to the first NUL byte (the whole rest when there is none).
std::string_view TakePart(std::string_view* rest) {
  const size_t end = rest->find('\0');
  const std::string_view part = rest->substr(0, end);
  *rest = end == std::string_view::npos ? std::string_view() : rest->substr(end + 1);
  return part;
}

void CheckIds(const std::vector<int32_t>& ids, const Tokenizer& tokenizer) {
  for (int32_t id : ids) {
    if (id < 0 || id >= tokenizer.vocab_size()) {
      std::fprintf(stderr, "Encode returned id %d outside [0, %d)\n", id, tokenizer.vocab_size());
      std::abort();
    }
  }
}

void Exercise(const Tokenizer& tokenizer, std::string_view text) {
  for (bool add_special_tokens : {false, true}) {
    const std::vector<int32_t> ids = tokenizer.Encode(text, add_special_tokens);
    CheckIds(ids, tokenizer);
    tokenizer.Decode(ids, /*skip_special_tokens=*/false);
    tokenizer.DecodeChunk(ids, /*skip_special_tokens=*/true);
  }
  // Ids the vocabulary may not have: Decode skips them.
  const std::vector<int32_t> odd_ids = {-1, 0, 1, tokenizer.vocab_size() - 1,
                                        tokenizer.vocab_size(), INT32_MAX};
  tokenizer.Decode(odd_ids, /*skip_special_tokens=*/false);
  tokenizer.Decode(odd_ids, /*skip_special_tokens=*/true);
  for (int32_t id : odd_ids) {
    tokenizer.IdToToken(id);
    tokenizer.IsSpecial(id);
  }
  tokenizer.TokenToId(text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  const std::string_view tokenizer_json = TakePart(&rest);
  const std::string_view config_json = TakePart(&rest);
  const std::string_view text = rest;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      Tokenizer::FromJsonText(tokenizer_json, config_json, "fuzz/tokenizer.json");
  if (tokenizer.ok()) Exercise(**tokenizer, text);
  return 0;
}
