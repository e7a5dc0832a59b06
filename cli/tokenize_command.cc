// `baton tokenize`: encodes text to ids or decodes ids to text with a tokenizer.json, printing JSON.
//
//   baton tokenize --tokenizer PATH [--text TEXT | --input FILE] [--no-special-tokens]
//                  [--decode [--incremental]] [--jsonl]
//
// Encode prints {"ids": [...]}. --decode reads ids (a JSON array, {"ids": [...]}, or integers
// separated by spaces/commas) and prints {"text": "..."}; with --incremental also "pieces", the
// strings an IncrementalDetokenizer returns id by id (its Flush last). --no-special-tokens means
// add_special_tokens=false when encoding and skip_special_tokens=true when decoding. Without
// --text or --input the input is stdin. --jsonl treats each input line as one JSON value (a string
// to encode, or ids to decode) and prints one JSON object per line. Errors: one line on stderr and
// exit code 2.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli/commands.h"
#include "nlohmann/json.hpp"
#include "runtime/tokenizer/absl_compat.h"
#include "runtime/tokenizer/incremental_detokenizer.h"
#include "runtime/tokenizer/tokenizer.h"

namespace baton::cli {
namespace {

using runtime::IncrementalDetokenizer;
using runtime::Tokenizer;

struct TokenizeOptions {
  std::string tokenizer_path;
  std::string text;
  std::string input_path;
  bool no_special_tokens = false;
  bool decode = false;
  bool incremental = false;
  bool jsonl = false;
};

absl::StatusOr<std::string> ReadInput(const TokenizeOptions& options, bool has_text) {
  if (has_text) return options.text;
  std::ostringstream contents;
  if (options.input_path.empty()) {
    contents << std::cin.rdbuf();
    return contents.str();
  }
  std::ifstream stream(options.input_path, std::ios::binary);
  if (!stream) return absl::NotFoundError(absl::StrCat(options.input_path, ": cannot be opened"));
  contents << stream.rdbuf();
  return contents.str();
}

absl::StatusOr<std::vector<int32_t>> IdsFromJson(const nlohmann::json& json) {
  const nlohmann::json* array = &json;
  if (json.is_object() && json.contains("ids")) array = &json["ids"];
  if (!array->is_array()) return absl::InvalidArgumentError("expected an array of token ids");
  std::vector<int32_t> ids;
  for (const nlohmann::json& value : *array) {
    if (!value.is_number_integer()) return absl::InvalidArgumentError("token ids must be integers");
    ids.push_back(value.get<int32_t>());
  }
  return ids;
}

absl::StatusOr<std::vector<int32_t>> ParseIds(std::string_view input) {
  const nlohmann::json json = nlohmann::json::parse(input, nullptr, /*allow_exceptions=*/false);
  if (!json.is_discarded()) return IdsFromJson(json);
  std::vector<int32_t> ids;
  for (absl::string_view field :
       absl::StrSplit(runtime::ToAbsl(input), absl::ByAnyChar(" \t\r\n,"), absl::SkipEmpty())) {
    int32_t id = 0;
    if (!absl::SimpleAtoi(field, &id)) {
      return absl::InvalidArgumentError(absl::StrCat("not a token id: \"", field, "\""));
    }
    ids.push_back(id);
  }
  return ids;
}

nlohmann::json EncodeOne(const Tokenizer& tokenizer, std::string_view text,
                         const TokenizeOptions& options) {
  return nlohmann::json{{"ids", tokenizer.Encode(text, !options.no_special_tokens)}};
}

nlohmann::json DecodeOne(const Tokenizer& tokenizer, const std::vector<int32_t>& ids,
                         const TokenizeOptions& options) {
  const bool skip = options.no_special_tokens;
  nlohmann::json out{{"text", tokenizer.Decode(ids, skip)}};
  if (options.incremental) {
    IncrementalDetokenizer detokenizer(tokenizer, skip);
    nlohmann::json pieces = nlohmann::json::array();
    for (const int32_t id : ids) pieces.push_back(detokenizer.Step(id));
    pieces.push_back(detokenizer.Flush());
    out["pieces"] = std::move(pieces);
  }
  return out;
}

void Print(const nlohmann::json& json) {
  std::cout << json.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace)
            << '\n';
}

absl::Status RunTokenize(const TokenizeOptions& options, bool has_text, bool has_input) {
  if (options.tokenizer_path.empty()) {
    return absl::InvalidArgumentError("--tokenizer PATH is required");
  }
  if (has_text && has_input) {
    return absl::InvalidArgumentError("--text and --input are mutually exclusive");
  }
  if (options.incremental && !options.decode) {
    return absl::InvalidArgumentError("--incremental needs --decode");
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromFile(options.tokenizer_path);
  if (!tokenizer.ok()) return tokenizer.status();
  absl::StatusOr<std::string> input = ReadInput(options, has_text);
  if (!input.ok()) return input.status();

  if (!options.jsonl) {
    if (!options.decode) {
      Print(EncodeOne(**tokenizer, *input, options));
      return absl::OkStatus();
    }
    absl::StatusOr<std::vector<int32_t>> ids = ParseIds(*input);
    if (!ids.ok()) return ids.status();
    Print(DecodeOne(**tokenizer, *ids, options));
    return absl::OkStatus();
  }
  // Validate every line before printing anything, so an error leaves no partial output.
  std::vector<nlohmann::json> outputs;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(*input, '\n', absl::SkipWhitespace())) {
    ++line_number;
    const nlohmann::json json =
        nlohmann::json::parse(runtime::ToStd(line), nullptr, /*allow_exceptions=*/false);
    if (json.is_discarded()) {
      return absl::InvalidArgumentError(absl::StrCat("line ", line_number, ": malformed JSON"));
    }
    if (!options.decode) {
      if (!json.is_string()) {
        return absl::InvalidArgumentError(absl::StrCat("line ", line_number, ": expected a string"));
      }
      outputs.push_back(EncodeOne(**tokenizer, json.get_ref<const std::string&>(), options));
    } else {
      absl::StatusOr<std::vector<int32_t>> ids = IdsFromJson(json);
      if (!ids.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("line ", line_number, ": ", ids.status().message()));
      }
      outputs.push_back(DecodeOne(**tokenizer, *ids, options));
    }
  }
  for (const nlohmann::json& output : outputs) Print(output);
  return absl::OkStatus();
}

}  // namespace

void RegisterTokenizeCommand(CLI::App& app, int* exit_code) {
  CLI::App* cmd = app.add_subcommand("tokenize", "Encode text or decode ids with a tokenizer.json");
  auto options = std::make_shared<TokenizeOptions>();
  cmd->add_option("--tokenizer", options->tokenizer_path, "Path to tokenizer.json");
  CLI::Option* text = cmd->add_option("--text", options->text, "Text to encode (or ids to decode)");
  CLI::Option* input = cmd->add_option("--input", options->input_path, "File to read instead");
  cmd->add_flag("--no-special-tokens", options->no_special_tokens,
                "Encode without the post-processor's special tokens; decode skipping special tokens");
  cmd->add_flag("--decode", options->decode, "Decode ids to text");
  cmd->add_flag("--incremental", options->incremental,
                "With --decode: also print the incremental detokenizer's pieces");
  cmd->add_flag("--jsonl", options->jsonl, "One JSON value per input line, one output per line");
  cmd->callback([options, text, input, exit_code] {
    const absl::Status status = RunTokenize(*options, text->count() > 0, input->count() > 0);
    if (!status.ok()) {
      std::cerr << "baton tokenize: " << status.message() << '\n';
      *exit_code = 2;
      return;
    }
    std::cout.flush();
    *exit_code = 0;
  });
}

}  // namespace baton::cli
