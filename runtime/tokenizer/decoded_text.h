// The result of decoding ids, with what an incremental detokenizer needs to know about its end.
#pragma once

#include <string>

namespace baton::runtime {

struct DecodedText {
  std::string text;  // valid UTF-8; undecodable bytes are U+FFFD as in `tokenizers`
  // The token bytes stop in the middle of a UTF-8 character that later tokens may complete (those
  // bytes show as U+FFFD in `text` for now). An incremental detokenizer holds such text back.
  bool ends_mid_char = false;
};

}  // namespace baton::runtime
