#include "runtime/tokenizer/bpe_model.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "nlohmann/json.hpp"
#include "runtime/tokenizer/absl_compat.h"
#include "runtime/tokenizer/utf8.h"

namespace baton::runtime {
namespace {

// One symbol of a word during merging: a node of a doubly linked list over a vector.
struct Symbol {
  int32_t id;
  int32_t prev;  // index of the previous live symbol, -1 at the start
  int32_t next;  // index of the next live symbol, -1 at the end
  bool removed;  // merged into its left neighbour
};

// A candidate merge of symbols[pos] with its right neighbour.
struct Candidate {
  uint32_t rank;
  int32_t pos;
  int32_t new_id;
};

// std::push_heap builds a max-heap: "less" means "merged later" (higher rank, then later pos).
bool MergedLater(const Candidate& a, const Candidate& b) {
  if (a.rank != b.rank) return a.rank > b.rank;
  return a.pos > b.pos;
}

}  // namespace

absl::StatusOr<std::unique_ptr<BpeModel>> BpeModel::FromJson(const nlohmann::json& model,
                                                             const JsonPath& at) {
  std::unique_ptr<BpeModel> bpe(new BpeModel());
  const nlohmann::json* vocab = FindField(model, "vocab");
  if (vocab == nullptr || !vocab->is_object()) {
    return at.Child("vocab").Invalid("expected an object mapping tokens to ids");
  }
  bpe->vocab_.reserve(vocab->size());
  int32_t max_id = -1;
  for (const auto& [token, id_json] : vocab->items()) {
    // The field path is built only for the error message: vocabs have ~10^5 entries.
    if (!id_json.is_number_integer() || id_json.get<int64_t>() < 0 ||
        id_json.get<int64_t>() >= kMaxTokenId) {
      return at.Child("vocab").Child(token).Invalid(
          absl::StrCat("expected a token id in [0, ", kMaxTokenId, ")"));
    }
    const int32_t id = id_json.get<int32_t>();
    bpe->vocab_[token] = id;
    max_id = std::max(max_id, id);
  }
  bpe->id_to_token_.resize(static_cast<size_t>(max_id) + 1);
  bpe->has_id_.assign(static_cast<size_t>(max_id) + 1, false);
  for (const auto& [token, id] : bpe->vocab_) {
    bpe->id_to_token_[id] = token;
    bpe->has_id_[id] = true;
  }

  if (const nlohmann::json* merges = FindField(model, "merges")) {
    RETURN_IF_ERROR(bpe->LoadMerges(*merges, at.Child("merges")));
  }
  ASSIGN_OR_RETURN(const std::string unk_token, ReadString(model, "unk_token", "", at));
  if (!unk_token.empty()) bpe->unk_id_ = bpe->TokenToId(unk_token);
  ASSIGN_OR_RETURN(bpe->fuse_unk_, ReadBool(model, "fuse_unk", false, at));
  ASSIGN_OR_RETURN(bpe->byte_fallback_, ReadBool(model, "byte_fallback", false, at));
  ASSIGN_OR_RETURN(bpe->ignore_merges_, ReadBool(model, "ignore_merges", false, at));
  ASSIGN_OR_RETURN(bpe->continuing_subword_prefix_,
                   ReadString(model, "continuing_subword_prefix", "", at));
  ASSIGN_OR_RETURN(bpe->end_of_word_suffix_, ReadString(model, "end_of_word_suffix", "", at));
  bpe->can_cut_words_ =
      bpe->continuing_subword_prefix_.empty() && bpe->end_of_word_suffix_.empty();
  if (bpe->can_cut_words_) {
    for (const auto& [token, id] : bpe->vocab_) {
      if (!utf8::IsValid(token)) continue;
      size_t pos = 0;
      char32_t previous = utf8::DecodeAt(token, &pos);
      while (pos < token.size()) {
        const char32_t current = utf8::DecodeAt(token, &pos);
        bpe->vocab_char_pairs_.insert(CharPairKey(previous, current));
        previous = current;
      }
    }
  }
  for (int byte = 0; byte < 256; ++byte) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", byte);
    bpe->byte_token_ids_[byte] = bpe->TokenToId(name).value_or(-1);
  }
  return bpe;
}

absl::Status BpeModel::LoadMerges(const nlohmann::json& merges, const JsonPath& at) {
  if (!merges.is_array()) return at.Invalid("expected an array");
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const nlohmann::json& merge = merges[rank];
    std::string left;
    std::string right;
    if (merge.is_string()) {
      // "a b": exactly one space separates the two parts.
      const std::string& text = merge.get_ref<const std::string&>();
      const size_t space = text.find(' ');
      if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
        return at.Index(rank).Invalid("expected \"<left> <right>\"");
      }
      left = text.substr(0, space);
      right = text.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) {
      left = merge[0].get<std::string>();
      right = merge[1].get<std::string>();
    } else {
      return at.Index(rank).Invalid("expected a string \"a b\" or a pair [\"a\", \"b\"]");
    }
    const std::optional<int32_t> left_id = TokenToId(left);
    const std::optional<int32_t> right_id = TokenToId(right);
    const std::optional<int32_t> new_id = TokenToId(left + right);
    if (!left_id || !right_id || !new_id) {
      return at.Index(rank).Invalid(
          absl::StrCat("merge of \"", left, "\" and \"", right, "\" uses a token not in the vocab"));
    }
    // A repeated pair keeps its last rank, as tokenizers' map construction does.
    merges_[PairKey(*left_id, *right_id)] = Merge{static_cast<uint32_t>(rank), *new_id};
  }
  return absl::OkStatus();
}

std::optional<int32_t> BpeModel::TokenToId(std::string_view token) const {
  const auto it = vocab_.find(ToAbsl(token));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::IdToToken(int32_t id) const {
  if (id < 0 || id >= id_limit() || !has_id_[id]) return nullptr;
  return &id_to_token_[id];
}

void BpeModel::InitialSymbols(std::string_view word, std::vector<int32_t>* symbol_ids) const {
  const bool affixes = !continuing_subword_prefix_.empty() || !end_of_word_suffix_.empty();
  std::string affixed;
  // A pending unknown run: its id, flushed before the next known symbol (fused when fuse_unk).
  std::optional<int32_t> pending_unk;
  size_t pos = 0;
  while (pos < word.size()) {
    const size_t begin = pos;
    pos += utf8::CharLength(static_cast<uint8_t>(word[pos]));
    std::string_view piece = word.substr(begin, pos - begin);
    if (affixes) {
      affixed.clear();
      if (begin != 0) affixed.append(continuing_subword_prefix_);
      affixed.append(piece);
      if (pos == word.size()) affixed.append(end_of_word_suffix_);
      piece = affixed;
    }
    if (const std::optional<int32_t> id = TokenToId(piece)) {
      if (pending_unk) symbol_ids->push_back(*std::exchange(pending_unk, std::nullopt));
      symbol_ids->push_back(*id);
      continue;
    }
    if (byte_fallback_) {
      const bool all_bytes_known = std::all_of(piece.begin(), piece.end(), [&](char byte) {
        return byte_token_ids_[static_cast<uint8_t>(byte)] >= 0;
      });
      if (all_bytes_known) {
        // Like tokenizers, a pending unk is not flushed here: it lands after these bytes.
        for (char byte : piece) symbol_ids->push_back(byte_token_ids_[static_cast<uint8_t>(byte)]);
        continue;
      }
    }
    if (unk_id_) {
      if (pending_unk && !fuse_unk_) symbol_ids->push_back(*pending_unk);
      pending_unk = *unk_id_;
    }
  }
  if (pending_unk) symbol_ids->push_back(*pending_unk);
}

void BpeModel::MergeWord(std::string_view word, std::vector<int32_t>* ids) const {
  std::vector<int32_t> symbol_ids;
  symbol_ids.reserve(word.size());
  InitialSymbols(word, &symbol_ids);
  const int32_t num_symbols = static_cast<int32_t>(symbol_ids.size());
  std::vector<Symbol> symbols(num_symbols);
  for (int32_t i = 0; i < num_symbols; ++i) {
    symbols[i] = {symbol_ids[i], i - 1, i + 1 < num_symbols ? i + 1 : -1, false};
  }
  const auto find_merge = [&](int32_t left, int32_t right) -> const Merge* {
    const auto it = merges_.find(PairKey(left, right));
    return it == merges_.end() ? nullptr : &it->second;
  };
  std::vector<Candidate> heap;
  heap.reserve(num_symbols);
  for (int32_t i = 0; i + 1 < num_symbols; ++i) {
    if (const Merge* merge = find_merge(symbols[i].id, symbols[i + 1].id)) {
      heap.push_back({merge->rank, i, merge->new_id});
    }
  }
  std::make_heap(heap.begin(), heap.end(), MergedLater);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), MergedLater);
    const Candidate top = heap.back();
    heap.pop_back();
    Symbol& left = symbols[top.pos];
    if (left.removed || left.next < 0) continue;
    // Skip stale candidates: the pair at `pos` must still merge into the same token.
    Symbol& right = symbols[left.next];
    const Merge* current = find_merge(left.id, right.id);
    if (current == nullptr || current->new_id != top.new_id) continue;
    left.id = top.new_id;
    right.removed = true;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    if (left.prev >= 0) {
      if (const Merge* merge = find_merge(symbols[left.prev].id, left.id)) {
        heap.push_back({merge->rank, left.prev, merge->new_id});
        std::push_heap(heap.begin(), heap.end(), MergedLater);
      }
    }
    if (left.next >= 0) {
      if (const Merge* merge = find_merge(left.id, symbols[left.next].id)) {
        heap.push_back({merge->rank, top.pos, merge->new_id});
        std::push_heap(heap.begin(), heap.end(), MergedLater);
      }
    }
  }
  for (const Symbol& symbol : symbols) {
    if (!symbol.removed) ids->push_back(symbol.id);
  }
}

void BpeModel::TokenizePiece(std::string_view piece, std::vector<int32_t>* ids) const {
  const bool cacheable = piece.size() < kMaxCachedWordBytes;
  if (cacheable && cache_.Lookup(piece, ids)) return;
  const size_t first = ids->size();
  MergeWord(piece, ids);
  if (cacheable) {
    cache_.Insert(piece, std::span<const int32_t>(ids->data() + first, ids->size() - first));
  }
}

void BpeModel::Tokenize(std::string_view word, std::vector<int32_t>* ids) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (const std::optional<int32_t> id = TokenToId(word)) {
      ids->push_back(*id);
      return;
    }
  }
  if (!can_cut_words_ || word.size() < kMinCutWordBytes) {
    TokenizePiece(word, ids);
    return;
  }
  // A merged token spanning the cut before character c would contain the pair (previous, c)
  // literally (both are their own symbols), and merges only make vocab tokens.
  size_t piece_begin = 0;
  size_t pos = 0;
  char32_t previous = 0;
  bool previous_known = false;
  while (pos < word.size()) {
    const size_t char_begin = pos;
    const char32_t current = utf8::DecodeAt(word, &pos);
    const bool known = vocab_.contains(ToAbsl(word.substr(char_begin, pos - char_begin)));
    if (char_begin > piece_begin && previous_known && known &&
        !vocab_char_pairs_.contains(CharPairKey(previous, current))) {
      TokenizePiece(word.substr(piece_begin, char_begin - piece_begin), ids);
      piece_begin = char_begin;
    }
    previous = current;
    previous_known = known;
  }
  TokenizePiece(word.substr(piece_begin), ids);
}

}  // namespace baton::runtime
