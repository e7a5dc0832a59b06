// Every CUDA kernel's launch shape, at the largest step Baton runs, is one a GPU accepts: a launch
// past CUDA's grid or block limits fails only on a GPU (cudaErrorInvalidConfiguration), and the
// emulated tests run small shapes, so the large ones are checked here through the same shape
// functions the launchers use. "Largest": a 1M-token prefill step (a long context not chunked),
// 4096 decode sequences, 128 heads, an intermediate of 53248 (Llama-3.1-405B) and a 256k
// vocabulary.
#include <cstdint>

#include "gtest/gtest.h"
#include "kernels/cuda/add.cuh"
#include "kernels/cuda/add_rms_norm.cuh"
#include "kernels/cuda/embedding.cuh"
#include "kernels/cuda/kv_gather.cuh"
#include "kernels/cuda/kv_write.cuh"
#include "kernels/cuda/logits_processors.cuh"
#include "kernels/cuda/paged_attention_decode.cuh"
#include "kernels/cuda/paged_attention_split_kv.cuh"
#include "kernels/cuda/prefill_attention.cuh"
#include "kernels/cuda/rms_norm.cuh"
#include "kernels/cuda/rope.cuh"
#include "kernels/cuda/sample.cuh"
#include "kernels/cuda/swiglu.cuh"
#include "kernels/cuda/token_bitmask.cuh"
#include "kernels/simt/simt.h"
#include "tests/testing/status_matchers.h"

namespace baton::kernels::cuda_detail {
namespace {

using absl_testing::IsOk;

constexpr int kTokens = 1 << 20;
constexpr int kSeqs = 4096;
constexpr int kHeads = 128;
constexpr int kHidden = 16384;
constexpr int kIntermediate = 53248;
constexpr int kVocab = 262144;

TEST(LaunchShapesTest, PerTokenKernelsTakeAMillionTokenStep) {
  AddParams add{};
  add.n = int64_t{kTokens} * kHidden;
  EXPECT_THAT(simt::CheckLaunchShape(AddLaunchShape(add)), IsOk());
  AddRmsNormParams add_rms{};
  add_rms.num_tokens = kTokens;
  EXPECT_THAT(simt::CheckLaunchShape(AddRmsNormLaunchShape(add_rms)), IsOk());
  RmsNormParams rms{};
  rms.num_tokens = kTokens;
  EXPECT_THAT(simt::CheckLaunchShape(RmsNormLaunchShape(rms)), IsOk());
  EmbeddingParams embedding{};
  embedding.num_tokens = kTokens;
  EXPECT_THAT(simt::CheckLaunchShape(EmbeddingLaunchShape(embedding)), IsOk());
  RopeParams rope{};
  rope.num_tokens = kTokens;
  EXPECT_THAT(simt::CheckLaunchShape(RopeLaunchShape(rope)), IsOk());
  KvWriteParams kv_write{};
  kv_write.num_tokens = kTokens;
  EXPECT_THAT(simt::CheckLaunchShape(KvWriteLaunchShape(kv_write)), IsOk());
  // SwiGLU once put the tokens on grid y (at most 65535): a longer prefill step did not launch.
  SwigluParams swiglu{};
  swiglu.num_tokens = kTokens;
  swiglu.intermediate = kIntermediate;
  EXPECT_THAT(simt::CheckLaunchShape(SwigluLaunchShape(swiglu)), IsOk());
}

TEST(LaunchShapesTest, AttentionTakesTheLargestStep) {
  for (const int head_dim : {64, 128, 256}) {
    PrefillAttentionParams prefill{};
    prefill.head_dim = head_dim;
    prefill.num_heads = kHeads;
    prefill.num_seqs = kSeqs;
    prefill.max_q_len = kTokens;
    const simt::LaunchShape shape = PrefillAttentionLaunchShape(prefill);
    EXPECT_THAT(simt::CheckLaunchShape(shape), IsOk()) << "head_dim " << head_dim;
  }
  PagedAttentionParams decode{};
  decode.num_heads = kHeads;
  decode.num_seqs = kSeqs;
  EXPECT_THAT(simt::CheckLaunchShape(PagedAttentionDecodeLaunchShape(decode)), IsOk());
  PagedAttentionSplitKvParams split{};
  split.attn = decode;
  split.num_splits = kSplitKvMaxSplits;
  EXPECT_THAT(simt::CheckLaunchShape(PagedAttentionSplitKvLaunchShape(split)), IsOk());
  EXPECT_THAT(simt::CheckLaunchShape(PagedAttentionSplitKvMergeLaunchShape(split)), IsOk());
  KvGatherParams gather{};
  gather.num_seqs = kSeqs;
  gather.max_len = kTokens;
  EXPECT_THAT(simt::CheckLaunchShape(KvGatherLaunchShape(gather)), IsOk());
}

TEST(LaunchShapesTest, SamplingTakesEveryVocabularyAndBatch) {
  for (const int vocab : {1, 32000, 128256, kVocab}) {
    SampleParams sample{};
    sample.num_seqs = kSeqs;
    sample.vocab_size = vocab;
    EXPECT_THAT(simt::CheckLaunchShape(SampleLaunchShape(sample)), IsOk()) << "vocab " << vocab;
  }
  LogitsProcessorsParams processors{};
  processors.num_seqs = kSeqs;
  EXPECT_THAT(simt::CheckLaunchShape(LogitsProcessorsLaunchShape(processors)), IsOk());
  for (const int vocab : {1, 128256, kVocab}) {
    TokenBitmaskParams bitmask{};
    bitmask.num_masked = kSeqs;
    bitmask.vocab_size = vocab;
    EXPECT_THAT(simt::CheckLaunchShape(TokenBitmaskLaunchShape(bitmask)), IsOk()) << "vocab " << vocab;
  }
}

}  // namespace
}  // namespace baton::kernels::cuda_detail
