// CpuCommGroup: every collective against a sequential computation in rank order (bit for bit),
// for groups of 1 to 4 thread ranks; send/recv in a pipeline; repeated rounds with random delays;
// timeouts, abort and mismatched calls return statuses instead of hanging.
#include "runtime/parallel/cpu_communicator.h"

#include <atomic>
#include <bit>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/dtype.h"
#include "tests/testing/status_matchers.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::testing::HasSubstr;

std::shared_ptr<CpuCommGroup> MakeGroup(int num_ranks, absl::Duration timeout = absl::Seconds(10)) {
  auto group = CpuCommGroup::Create({.num_ranks = num_ranks, .timeout = timeout});
  EXPECT_THAT(group, IsOk());
  return *group;
}

// Runs body(comm) on one thread per rank; returns each rank's status.
std::vector<absl::Status> RunRanks(CpuCommGroup& group,
                                   const std::function<absl::Status(Communicator&)>& body) {
  const int n = group.num_ranks();
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < n; ++r) {
    auto comm = group.Join(r);
    EXPECT_THAT(comm, IsOk());
    comms.push_back(std::move(*comm));
  }
  std::vector<absl::Status> statuses(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] { statuses[r] = body(*comms[r]); });
  }
  for (std::thread& t : threads) t.join();
  return statuses;
}

void ExpectAllOk(const std::vector<absl::Status>& statuses) {
  for (size_t r = 0; r < statuses.size(); ++r) EXPECT_THAT(statuses[r], IsOk()) << "rank " << r;
}

// Values whose f32 sum depends on the order of the additions (1e8 + 1 == 1e8 in f32).
float Value(int rank, size_t i) {
  static constexpr float kValues[] = {1e8f, 1.0f, -1e8f, 0.5f, 3e7f, -1.0f, 1e-3f, -3e7f, 7.25f};
  return kValues[(i * 7 + rank * (i % 5 + 1) + i / 9) % std::size(kValues)];
}

constexpr size_t kCount = 1001;  // not a multiple of the slice rounding

class CpuCommunicatorTest : public ::testing::TestWithParam<int> {};

TEST_P(CpuCommunicatorTest, AllReduceF32EqualsRankOrderSumBitForBit) {
  const int n = GetParam();
  std::vector<std::vector<float>> results(n);
  auto group = MakeGroup(n);
  ExpectAllOk(RunRanks(*group, [&](Communicator& comm) {
    std::vector<float>& data = results[comm.rank()];
    for (size_t i = 0; i < kCount; ++i) data.push_back(Value(comm.rank(), i));
    return comm.AllReduceSum(data.data(), data.size());
  }));
  size_t num_order_sensitive = 0;
  for (size_t i = 0; i < kCount; ++i) {
    float expected = Value(0, i);
    for (int r = 1; r < n; ++r) expected += Value(r, i);
    float reversed = Value(n - 1, i);
    for (int r = n - 2; r >= 0; --r) reversed += Value(r, i);
    if (std::bit_cast<uint32_t>(expected) != std::bit_cast<uint32_t>(reversed)) {
      ++num_order_sensitive;
    }
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(std::bit_cast<uint32_t>(results[r][i]), std::bit_cast<uint32_t>(expected))
          << "rank " << r << " element " << i << ": " << results[r][i] << " vs " << expected;
    }
  }
  // The values make the order visible: a reduction in another order would fail above.
  if (n >= 3) {
    EXPECT_GT(num_order_sensitive, 0u);
  }
}

TEST_P(CpuCommunicatorTest, AllReduceBf16AccumulatesInF32AndRoundsOnce) {
  const int n = GetParam();
  std::vector<std::vector<uint16_t>> results(n);
  auto bf16_value = [](int rank, size_t i) {
    return F32ToBf16(static_cast<float>((i * 7 + rank * 13) % 97) * 0.37f - 11.0f);
  };
  auto group = MakeGroup(n);
  ExpectAllOk(RunRanks(*group, [&](Communicator& comm) {
    std::vector<uint16_t>& data = results[comm.rank()];
    for (size_t i = 0; i < kCount; ++i) data.push_back(bf16_value(comm.rank(), i));
    return comm.AllReduceSum(data.data(), data.size(), DType::kBF16);
  }));
  for (size_t i = 0; i < kCount; ++i) {
    float sum = Bf16ToF32(bf16_value(0, i));
    for (int r = 1; r < n; ++r) sum += Bf16ToF32(bf16_value(r, i));
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(results[r][i], F32ToBf16(sum)) << "rank " << r << " element " << i;
    }
  }
}

TEST_P(CpuCommunicatorTest, AllGatherConcatenatesInRankOrder) {
  const int n = GetParam();
  constexpr size_t kBytes = 37;
  std::vector<std::vector<uint8_t>> recvs(n, std::vector<uint8_t>(n * kBytes));
  auto group = MakeGroup(n);
  ExpectAllOk(RunRanks(*group, [&](Communicator& comm) {
    std::vector<uint8_t> send(kBytes);
    for (size_t i = 0; i < kBytes; ++i) send[i] = static_cast<uint8_t>(comm.rank() * 50 + i);
    return comm.AllGather(send.data(), recvs[comm.rank()].data(), kBytes);
  }));
  for (int r = 0; r < n; ++r) {
    for (int src = 0; src < n; ++src) {
      for (size_t i = 0; i < kBytes; ++i) {
        ASSERT_EQ(recvs[r][src * kBytes + i], static_cast<uint8_t>(src * 50 + i));
      }
    }
  }
}

TEST_P(CpuCommunicatorTest, BroadcastFromLastRank) {
  const int n = GetParam();
  const int root = n - 1;
  std::vector<std::vector<float>> data(n, std::vector<float>(100));
  auto group = MakeGroup(n);
  ExpectAllOk(RunRanks(*group, [&](Communicator& comm) {
    std::vector<float>& mine = data[comm.rank()];
    for (size_t i = 0; i < mine.size(); ++i) mine[i] = comm.rank() * 1000.0f + i;
    return comm.Broadcast(mine.data(), mine.size() * sizeof(float), root);
  }));
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < 100; ++i) ASSERT_EQ(data[r][i], root * 1000.0f + i);
  }
}

// Stage s receives each micro-batch from stage s - 1, adds s, and sends it on.
TEST_P(CpuCommunicatorTest, SendRecvThroughPipelineStagesInOrder) {
  const int n = GetParam();
  constexpr int kMicroBatches = 5;
  constexpr size_t kHidden = 64;
  std::vector<std::vector<float>> last_stage_out;
  auto group = MakeGroup(n);
  ExpectAllOk(RunRanks(*group, [&](Communicator& comm) -> absl::Status {
    const int stage = comm.rank();
    for (int mb = 0; mb < kMicroBatches; ++mb) {
      std::vector<float> x(kHidden, static_cast<float>(mb));
      if (stage > 0) {
        if (absl::Status s = comm.Recv(x.data(), x.size() * sizeof(float), stage - 1); !s.ok()) {
          return s;
        }
      }
      for (float& v : x) v += static_cast<float>(stage);
      if (stage + 1 < n) {
        if (absl::Status s = comm.Send(x.data(), x.size() * sizeof(float), stage + 1); !s.ok()) {
          return s;
        }
      } else {
        last_stage_out.push_back(x);
      }
    }
    return absl::OkStatus();
  }));
  ASSERT_EQ(last_stage_out.size(), static_cast<size_t>(kMicroBatches));
  const float stage_sum = n * (n - 1) / 2.0f;
  for (int mb = 0; mb < kMicroBatches; ++mb) {
    for (float v : last_stage_out[mb]) ASSERT_EQ(v, mb + stage_sum);
  }
}

TEST_P(CpuCommunicatorTest, BarrierWaitsForEveryRank) {
  const int n = GetParam();
  std::atomic<int> num_before{0};
  std::atomic<bool> early{false};
  auto group = MakeGroup(n);
  ExpectAllOk(RunRanks(*group, [&](Communicator& comm) -> absl::Status {
    absl::SleepFor(absl::Milliseconds(2 * comm.rank()));
    num_before.fetch_add(1);
    absl::Status status = comm.Barrier();
    if (num_before.load() != n) early = true;
    return status;
  }));
  EXPECT_FALSE(early);
}

// Many rounds of mixed collectives with random delays between them: a generation bug (a rank
// overtaking another, a buffer reused too early) shows up as a wrong value.
TEST_P(CpuCommunicatorTest, RepeatedRoundsWithRandomDelays) {
  const int n = GetParam();
  constexpr int kRounds = 100;
  constexpr size_t kLen = 53;
  auto group = MakeGroup(n);
  ExpectAllOk(RunRanks(*group, [&](Communicator& comm) -> absl::Status {
    const int rank = comm.rank();
    std::mt19937 rng(1234 + rank);
    auto jitter = [&] {
      if (rng() % 4 == 0) absl::SleepFor(absl::Microseconds(rng() % 200));
    };
    for (int round = 0; round < kRounds; ++round) {
      std::vector<float> data(kLen);
      for (size_t i = 0; i < kLen; ++i) data[i] = static_cast<float>(round + rank * 10 + i);
      jitter();
      if (absl::Status s = comm.AllReduceSum(data.data(), kLen); !s.ok()) return s;
      for (size_t i = 0; i < kLen; ++i) {
        const float expected = n * static_cast<float>(round + i) + 10.0f * n * (n - 1) / 2;
        if (data[i] != expected) {
          return absl::InternalError(absl::StrCat("round ", round, " all-reduce element ", i, ": ",
                                                  data[i], " != ", expected));
        }
      }
      jitter();
      const int root = round % n;
      int value = rank == root ? round * 7 : -1;
      if (absl::Status s = comm.Broadcast(&value, sizeof(value), root); !s.ok()) return s;
      if (value != round * 7) return absl::InternalError(absl::StrCat("round ", round, " bcast"));
      jitter();
      const int mine = round * 100 + rank;
      std::vector<int> all(n);
      if (absl::Status s = comm.AllGather(&mine, all.data(), sizeof(int)); !s.ok()) return s;
      for (int r = 0; r < n; ++r) {
        if (all[r] != round * 100 + r) {
          return absl::InternalError(absl::StrCat("round ", round, " all-gather from ", r));
        }
      }
      jitter();
      if (absl::Status s = comm.Barrier(); !s.ok()) return s;
    }
    return absl::OkStatus();
  }));
}

INSTANTIATE_TEST_SUITE_P(GroupSizes, CpuCommunicatorTest, ::testing::Values(1, 2, 3, 4),
                         [](const auto& info) { return absl::StrCat(info.param, "ranks"); });

TEST(CpuCommGroupTest, MissingPeerIsDeadlineExceededAndAbortsTheGroup) {
  auto group = MakeGroup(2, absl::Milliseconds(100));
  auto rank0 = group->Join(0);
  auto rank1 = group->Join(1);
  ASSERT_THAT(rank0, IsOk());
  ASSERT_THAT(rank1, IsOk());
  std::vector<float> data(10, 1.0f);
  const absl::Time start = absl::Now();
  EXPECT_THAT((*rank0)->AllReduceSum(data.data(), data.size()),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("1 of 2 ranks")));
  const absl::Duration elapsed = absl::Now() - start;
  EXPECT_GE(elapsed, absl::Milliseconds(100));
  EXPECT_LT(elapsed, absl::Seconds(2));
  // The peer that comes late finds the group aborted rather than waiting for a collective that
  // can no longer complete.
  EXPECT_THAT((*rank1)->AllReduceSum(data.data(), data.size()),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("timed out")));
}

TEST(CpuCommGroupTest, RecvWithoutSendIsDeadlineExceededAndKeepsTheGroup) {
  auto group = MakeGroup(2, absl::Milliseconds(50));
  auto rank0 = group->Join(0);
  auto rank1 = group->Join(1);
  ASSERT_THAT(rank0, IsOk());
  ASSERT_THAT(rank1, IsOk());
  int value = 0;
  EXPECT_THAT((*rank1)->Recv(&value, sizeof(value), 0),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("from rank 0")));
  const int sent = 42;
  EXPECT_THAT((*rank0)->Send(&sent, sizeof(sent), 1), IsOk());
  EXPECT_THAT((*rank1)->Recv(&value, sizeof(value), 0), IsOk());
  EXPECT_EQ(value, 42);
}

TEST(CpuCommGroupTest, AbortWakesAWaiter) {
  auto group = MakeGroup(2, absl::Seconds(30));
  auto rank0 = group->Join(0);
  ASSERT_THAT(rank0, IsOk());
  absl::Status barrier_status;
  absl::Status recv_status;
  const absl::Time start = absl::Now();
  std::thread waiter([&] { barrier_status = (*rank0)->Barrier(); });
  std::thread receiver([&] {
    int value;
    recv_status = (*rank0)->Recv(&value, sizeof(value), 1);
  });
  absl::SleepFor(absl::Milliseconds(20));
  group->Abort("rank 1 failed to load its shard");
  waiter.join();
  receiver.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_THAT(barrier_status, StatusIs(absl::StatusCode::kAborted, HasSubstr("rank 1 failed")));
  EXPECT_THAT(recv_status, StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT((*rank0)->Barrier(), StatusIs(absl::StatusCode::kAborted));
}

TEST(CpuCommGroupTest, MismatchedCollectivesAreReportedNotHung) {
  auto group = MakeGroup(2);
  std::vector<absl::Status> statuses = RunRanks(*group, [](Communicator& comm) {
    std::vector<float> data(10 + comm.rank());
    return comm.AllReduceSum(data.data(), data.size());
  });
  for (const absl::Status& status : statuses) {
    EXPECT_TRUE(absl::IsInvalidArgument(status) || absl::IsAborted(status)) << status;
    EXPECT_THAT(status.message(), HasSubstr("do not match"));
  }
}

TEST(CpuCommGroupTest, RecvOfTheWrongSizeIsInvalidArgument) {
  auto group = MakeGroup(2);
  auto rank0 = group->Join(0);
  auto rank1 = group->Join(1);
  ASSERT_THAT(rank0, IsOk());
  ASSERT_THAT(rank1, IsOk());
  const int64_t sent = 7;
  ASSERT_THAT((*rank0)->Send(&sent, sizeof(sent), 1), IsOk());
  int32_t value;
  EXPECT_THAT((*rank1)->Recv(&value, sizeof(value), 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("send of 8 bytes")));
}

TEST(CpuCommGroupTest, RejectsBadArguments) {
  EXPECT_THAT(CpuCommGroup::Create({.num_ranks = 0}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(CpuCommGroup::Create({.num_ranks = 2, .timeout = absl::ZeroDuration()}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  auto group = MakeGroup(2);
  EXPECT_THAT(group->Join(2), StatusIs(absl::StatusCode::kInvalidArgument));
  auto rank0 = group->Join(0);
  ASSERT_THAT(rank0, IsOk());
  EXPECT_THAT(group->Join(0), StatusIs(absl::StatusCode::kFailedPrecondition));
  uint16_t half[4] = {};
  EXPECT_THAT((*rank0)->AllReduceSum(half, 4, DType::kF16),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("f16")));
  EXPECT_THAT((*rank0)->Send(half, sizeof(half), 5), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT((*rank0)->Broadcast(half, sizeof(half), -1),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace baton::runtime
