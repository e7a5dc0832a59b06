#include "runtime/engine/model_runner.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/common/status_macros.h"
#include "runtime/engine/spare_objects.h"

namespace baton::runtime {

std::vector<std::vector<StepPiece>> PlanMicroBatches(std::span<const int> q_lens, int num_stages,
                                                     int steps_in_flight) {
  const int num_seqs = static_cast<int>(q_lens.size());
  std::vector<std::vector<StepPiece>> plan;
  if (num_seqs == 0) return plan;
  int64_t total = 0;
  bool has_prompt = false;
  for (int q : q_lens) {
    total += q;
    has_prompt = has_prompt || q > 1;
  }
  const int in_flight = std::max(steps_in_flight, 1);
  const int64_t decode_parts = (num_stages + in_flight - 1) / in_flight;
  int64_t parts = num_stages <= 1 ? 1 : has_prompt ? 2 * num_stages : decode_parts;
  parts = std::max<int64_t>(1, std::min<int64_t>(parts, has_prompt ? total / kMinChunkTokens
                                                                    : num_seqs));
  if (parts == 1) {
    plan.emplace_back();
    for (int i = 0; i < num_seqs; ++i) plan.back().push_back({.seq = i, .q_begin = 0, .q_len = q_lens[i]});
    return plan;
  }
  const int64_t target = (total + parts - 1) / parts;
  plan.emplace_back();
  int64_t fill = 0;
  for (int i = 0; i < num_seqs; ++i) {
    int begin = 0;
    while (begin < q_lens[i]) {
      if (fill >= target && static_cast<int64_t>(plan.size()) < parts) {
        plan.emplace_back();
        fill = 0;
      }
      int take = static_cast<int>(std::min<int64_t>(q_lens[i] - begin, target - fill));
      // The last part takes the rest; a leftover too small for a chunk of its own stays here.
      if (static_cast<int64_t>(plan.size()) == parts || q_lens[i] - begin - take < kMinChunkTokens) {
        take = q_lens[i] - begin;
      }
      take = std::max(take, 1);
      plan.back().push_back({.seq = i, .q_begin = begin, .q_len = take});
      begin += take;
      fill += take;
    }
  }
  return plan;
}

void ModelRunner::Build(const ScheduledStep& step, std::span<const StepPiece> pieces,
                        std::span<const TokenSampling> sampling, bool return_logits,
                        MicroBatch& mb) {
  mb.token_ids.clear();
  mb.sampling.clear();
  mb.positions.clear();
  mb.slot_mapping.clear();
  mb.context_lens.clear();
  mb.q_start.assign(1, 0);
  mb.prompt_targets.clear();
  mb.prompt_top_k.clear();
  const bool scores_prompt = std::any_of(pieces.begin(), pieces.end(), [&](const StepPiece& piece) {
    return step.seqs[piece.seq]->ScoresPrompt();
  });
  bool any_target = false;
  int max_blocks_per_seq = 1;
  int num_decode_seqs = 0;
  for (const StepPiece& piece : pieces) {
    const Sequence& seq = *step.seqs[piece.seq];
    const int first = seq.num_computed_tokens + piece.q_begin;
    const int last = first + piece.q_len;
    for (int pos = first; pos < last; ++pos) {
      mb.token_ids.push_back(seq.token_ids[pos]);
      mb.positions.push_back(pos);
      mb.slot_mapping.push_back(seq.block_table.SlotOf(pos));
    }
    if (scores_prompt) {
      // A row scores the prompt token after it; the prompt's last row predicts the first token.
      const bool scores = seq.ScoresPrompt();
      for (int pos = first; pos < last; ++pos) {
        const bool target = scores && pos + 1 < seq.num_prompt_tokens;
        mb.prompt_targets.push_back(target ? seq.token_ids[pos + 1] : -1);
        any_target = any_target || target;
      }
      mb.prompt_top_k.push_back(scores ? *seq.params.num_prompt_logprobs : 0);
    }
    mb.q_start.push_back(static_cast<int32_t>(mb.token_ids.size()));
    mb.context_lens.push_back(last);
    max_blocks_per_seq =
        std::max(max_blocks_per_seq, static_cast<int>(seq.block_table.blocks().size()));
    if (piece.seq < step.num_decode_seqs) ++num_decode_seqs;
    mb.sampling.push_back(sampling[piece.seq]);
  }
  mb.block_tables.assign(pieces.size() * max_blocks_per_seq, 0);
  for (size_t i = 0; i < pieces.size(); ++i) {
    const auto& blocks = step.seqs[pieces[i].seq]->block_table.blocks();
    std::copy(blocks.begin(), blocks.end(), mb.block_tables.begin() + i * max_blocks_per_seq);
  }
  mb.batch = StepBatch{.token_ids = mb.token_ids,
                       .positions = mb.positions,
                       .slot_mapping = mb.slot_mapping,
                       .q_start = mb.q_start,
                       .context_lens = mb.context_lens,
                       .block_tables = mb.block_tables,
                       .sampling = mb.sampling,
                       .num_decode_seqs = num_decode_seqs,
                       .max_blocks_per_seq = max_blocks_per_seq,
                       .return_logits = return_logits};
  if (any_target) {
    mb.batch.prompt_targets = mb.prompt_targets;
    mb.batch.prompt_top_k = mb.prompt_top_k;
  }
}

void ModelRunner::Submit(const ScheduledStep& step, std::span<const TokenSampling> sampling,
                         bool return_logits) {
  std::unique_ptr<Flight> flight = TakeSpare(spare_);
  flight->plan = PlanMicroBatches(step.q_lens, ranks_->layout().pp_size, steps_in_flight_);
  flight->return_logits = return_logits;
  if (flight->micro_batches.size() < flight->plan.size()) {
    flight->micro_batches.resize(flight->plan.size());
  }
  flight->batches.clear();
  for (size_t m = 0; m < flight->plan.size(); ++m) {
    Build(step, flight->plan[m], sampling, return_logits, flight->micro_batches[m]);
    flight->batches.push_back(flight->micro_batches[m].batch);
  }
  flight->ticket = ranks_->Submit(flight->batches, &step.swap_out, &step.swap_in);
  flights_.push_back(std::move(flight));
}

absl::Status ModelRunner::Wait(const ScheduledStep& step, StepOutput* out) {
  spare_.push_back(std::move(flights_.front()));  // its arrays stay valid until the next Submit
  flights_.pop_front();
  const Flight& flight = *spare_.back();
  size_t num_pieces = 0;
  for (const auto& pieces : flight.plan) num_pieces += pieces.size();
  if (num_pieces == step.seqs.size()) {
    // No sequence was cut: the rows are the sequences', in order.
    RETURN_IF_ERROR(ranks_->Wait(flight.ticket, out));
  } else {
    RETURN_IF_ERROR(ranks_->Wait(flight.ticket, &piece_output_));
    const size_t vocab = flight.return_logits ? piece_output_.logits.size() / num_pieces : 0;
    out->token_ids.resize(step.seqs.size());
    out->logits.resize(step.seqs.size() * vocab);
    out->prompt_logprobs.clear();
    std::vector<int> seq_of_piece;  // [num_pieces] the step's sequence each piece is of
    for (const auto& pieces : flight.plan) {
      for (const StepPiece& piece : pieces) seq_of_piece.push_back(piece.seq);
    }
    for (PromptTokenLogprobs& scored : piece_output_.prompt_logprobs) {
      scored.seq = seq_of_piece[scored.seq];
      out->prompt_logprobs.push_back(std::move(scored));
    }
    size_t row = 0;
    for (const auto& pieces : flight.plan) {
      for (const StepPiece& piece : pieces) {
        if (piece.q_begin + piece.q_len == step.q_lens[piece.seq]) {  // the sequence's last chunk
          out->token_ids[piece.seq] = piece_output_.token_ids[row];
          if (vocab > 0) {
            std::memcpy(out->logits.data() + piece.seq * vocab,
                        piece_output_.logits.data() + row * vocab, vocab * sizeof(float));
          }
        }
        ++row;
      }
    }
  }
  for (size_t i = 0; i < step.seqs.size(); ++i) {
    Sequence& seq = *step.seqs[i];
    seq.num_computed_tokens += step.q_lens[i];
    seq.block_table.AppendTokens(step.q_lens[i]);
  }
  return absl::OkStatus();
}

}  // namespace baton::runtime
