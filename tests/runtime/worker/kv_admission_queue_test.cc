// The KV admission queue against a fake engine: FIFO order with head-of-line blocking, validation at
// enqueue, and no leaked blocks when a waiter gives up (deadline, cancellation, or a race of either
// with the admission).
#include "runtime/worker/kv_admission_queue.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A pool of num_blocks blocks where a request needs one block per prompt token. Thread-safe, so a
// test can free from a waiter's thread (the worker posts the free to the engine thread instead).
class FakeAdmitter final : public KvAdmitter {
 public:
  explicit FakeAdmitter(int num_blocks)
      : num_blocks_(num_blocks),
        pool_(*KvPool::Create(KvPoolShape{.num_layers = 1, .num_kv_heads = 1, .head_dim = 1,
                                          .block_size = 1},
                              num_blocks)),
        num_blocks_free_(num_blocks) {}

  absl::Status Validate(const PrefilledRequest& request) const override {
    if (request.prompt_token_ids.empty() || NumBlocks(request) > num_blocks_) {
      return absl::InvalidArgumentError(
          absl::StrCat("prompt of ", request.prompt_token_ids.size(), " tokens does not fit"));
    }
    return absl::OkStatus();
  }
  bool CanAdmit(const PrefilledRequest& request) const override {
    absl::MutexLock lock(&mu_);
    return NumBlocks(request) <= num_blocks_free_;
  }
  absl::StatusOr<KvAdmission> Admit(PrefilledRequest request) override {
    absl::MutexLock lock(&mu_);
    const int n = NumBlocks(request);
    if (n > num_blocks_free_) return absl::ResourceExhaustedError("no room");
    KvAdmission admission{.seq_id = next_seq_id_++, .pools = {pool_.get()}};
    for (int i = 0; i < n; ++i) admission.blocks.push_back(num_blocks_ - num_blocks_free_ + i);
    num_blocks_free_ -= n;
    held_[admission.seq_id] = n;
    admitted_.push_back(request.prompt_token_ids.front());  // the test's tag for the request
    return admission;
  }

  // Frees an admitted sequence's blocks.
  void Free(SeqId seq_id) {
    absl::MutexLock lock(&mu_);
    auto it = held_.find(seq_id);
    ASSERT_NE(it, held_.end()) << "freed twice or never admitted: " << seq_id;
    num_blocks_free_ += it->second;
    held_.erase(it);
  }
  // Takes (or gives back) blocks for sequences outside the queue, like running ones.
  void Use(int num_blocks) {
    absl::MutexLock lock(&mu_);
    num_blocks_free_ -= num_blocks;
  }
  int num_blocks_free() const {
    absl::MutexLock lock(&mu_);
    return num_blocks_free_;
  }
  // The tags of the requests admitted, in order.
  std::vector<int32_t> admitted() const {
    absl::MutexLock lock(&mu_);
    return admitted_;
  }

  const KvPool* pool() const { return pool_.get(); }

 private:
  static int NumBlocks(const PrefilledRequest& request) {
    return static_cast<int>(request.prompt_token_ids.size());
  }

  const int num_blocks_;
  const std::unique_ptr<KvPool> pool_;  // handed out with every admission
  mutable absl::Mutex mu_;
  int num_blocks_free_ ABSL_GUARDED_BY(mu_);
  SeqId next_seq_id_ ABSL_GUARDED_BY(mu_) = 100;
  absl::flat_hash_map<SeqId, int> held_ ABSL_GUARDED_BY(mu_);
  std::vector<int32_t> admitted_ ABSL_GUARDED_BY(mu_);
};

// A request of num_tokens tokens, tagged `tag` (its first token id).
std::shared_ptr<KvAdmissionTicket> Ticket(int32_t tag, int num_tokens) {
  std::vector<int32_t> prompt(num_tokens, tag);
  return std::make_shared<KvAdmissionTicket>(
      PrefilledRequest{.prompt_token_ids = std::move(prompt), .generated_token_ids = {7}});
}

class KvAdmissionQueueTest : public ::testing::Test {
 protected:
  // Wait params that never wait long and free through the fake.
  KvAdmissionTicket::WaitParams Params(absl::Duration timeout = absl::Milliseconds(200),
                                       std::function<bool()> is_cancelled = nullptr) {
    return {.deadline = absl::Now() + timeout,
            .is_cancelled = std::move(is_cancelled),
            .poll_interval = absl::Milliseconds(5),
            .free_admitted = [this](SeqId seq_id) {
              freed_.push_back(seq_id);
              admitter_.Free(seq_id);
            }};
  }

  FakeAdmitter admitter_{10};
  KvAdmissionQueue queue_;
  std::vector<SeqId> freed_;
};

TEST_F(KvAdmissionQueueTest, AdmitsInFifoOrderAndTheHeadBlocksSmallerRequestsBehindIt) {
  admitter_.Use(6);  // 4 free
  auto a = Ticket(1, 5);
  auto b = Ticket(2, 1);
  auto c = Ticket(3, 3);
  for (const auto& t : {a, b, c}) queue_.Enqueue(t, admitter_);

  queue_.AdmitReady(admitter_);
  // b would fit, but a is first: nothing moves until a fits.
  EXPECT_THAT(admitter_.admitted(), ::testing::IsEmpty());
  EXPECT_EQ(queue_.size(), 3);

  admitter_.Use(-2);  // 6 free: a (5) then b (1); c (3) waits
  queue_.AdmitReady(admitter_);
  EXPECT_THAT(admitter_.admitted(), ElementsAre(1, 2));
  EXPECT_EQ(queue_.size(), 1);

  admitter_.Use(-3);
  queue_.AdmitReady(admitter_);
  EXPECT_THAT(admitter_.admitted(), ElementsAre(1, 2, 3));
  EXPECT_EQ(queue_.size(), 0);

  absl::StatusOr<KvAdmission> got_a = a->Wait(Params());
  ASSERT_THAT(got_a, IsOk());
  EXPECT_EQ(got_a->blocks.size(), 5u);
  EXPECT_THAT(got_a->pools, ElementsAre(admitter_.pool()));
  ASSERT_THAT(b->Wait(Params()), IsOk());
  ASSERT_THAT(c->Wait(Params()), IsOk());
  EXPECT_THAT(freed_, ::testing::IsEmpty());
}

TEST_F(KvAdmissionQueueTest, AnInvalidRequestIsAnsweredAtOnceAndNeverHoldsTheQueue) {
  auto too_big = Ticket(1, 11);  // more blocks than the pool has: would block the head for ever
  auto fine = Ticket(2, 2);
  queue_.Enqueue(too_big, admitter_);
  queue_.Enqueue(fine, admitter_);
  EXPECT_EQ(queue_.size(), 1);
  EXPECT_THAT(too_big->Wait(Params()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("does not fit")));
  queue_.AdmitReady(admitter_);
  EXPECT_THAT(fine->Wait(Params()), IsOk());
}

TEST_F(KvAdmissionQueueTest, AFailedAdmissionIsHandedToTheWaiter) {
  class FailingAdmitter final : public KvAdmitter {
   public:
    absl::Status Validate(const PrefilledRequest&) const override { return absl::OkStatus(); }
    bool CanAdmit(const PrefilledRequest&) const override { return true; }
    absl::StatusOr<KvAdmission> Admit(PrefilledRequest) override {
      return absl::InternalError("engine says no");
    }
  } failing;
  auto t = Ticket(1, 1);
  queue_.Enqueue(t, failing);
  queue_.AdmitReady(failing);
  EXPECT_EQ(queue_.size(), 0);
  EXPECT_THAT(t->Wait(Params()), StatusIs(absl::StatusCode::kInternal, HasSubstr("engine says no")));
}

TEST_F(KvAdmissionQueueTest, AWaiterPastItsDeadlineGetsDeadlineExceededAndIsNeverAdmitted) {
  admitter_.Use(10);
  auto t = Ticket(1, 3);
  queue_.Enqueue(t, admitter_);
  const absl::Time start = absl::Now();
  EXPECT_THAT(t->Wait(Params(absl::Milliseconds(30))),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("no KV room before the deadline")));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(30));

  admitter_.Use(-10);  // room now, but the waiter is gone
  queue_.AdmitReady(admitter_);
  EXPECT_EQ(queue_.size(), 0);
  EXPECT_THAT(admitter_.admitted(), ::testing::IsEmpty());
  EXPECT_EQ(admitter_.num_blocks_free(), 10);
}

TEST_F(KvAdmissionQueueTest, ACancelledWaiterGetsCancelledAndIsNeverAdmitted) {
  admitter_.Use(10);
  auto t = Ticket(1, 3);
  queue_.Enqueue(t, admitter_);
  std::atomic<int> polls = 0;
  // Cancelled on the third look: the probe is polled while the waiter sleeps.
  EXPECT_THAT(t->Wait(Params(absl::Seconds(10), [&] { return ++polls >= 3; })),
              StatusIs(absl::StatusCode::kCancelled, HasSubstr("cancelled while waiting for KV room")));
  EXPECT_EQ(polls, 3);

  admitter_.Use(-10);
  queue_.AdmitReady(admitter_);
  EXPECT_EQ(queue_.size(), 0);
  EXPECT_THAT(admitter_.admitted(), ::testing::IsEmpty());
  EXPECT_EQ(admitter_.num_blocks_free(), 10);
}

TEST_F(KvAdmissionQueueTest, AnAbandonedHeadNoLongerBlocksTheRequestsBehindIt) {
  admitter_.Use(8);  // 2 free
  auto big = Ticket(1, 5);
  auto small = Ticket(2, 2);
  queue_.Enqueue(big, admitter_);
  queue_.Enqueue(small, admitter_);
  queue_.AdmitReady(admitter_);
  EXPECT_THAT(admitter_.admitted(), ::testing::IsEmpty());
  EXPECT_THAT(big->Wait(Params(absl::ZeroDuration())), StatusIs(absl::StatusCode::kDeadlineExceeded));
  queue_.AdmitReady(admitter_);
  EXPECT_THAT(admitter_.admitted(), ElementsAre(2));
  EXPECT_THAT(small->Wait(Params()), IsOk());
}

TEST_F(KvAdmissionQueueTest, CancellationRacingTheAdmissionFreesTheAdmittedSequence) {
  auto t = Ticket(1, 4);
  queue_.Enqueue(t, admitter_);
  queue_.AdmitReady(admitter_);  // admitted before the waiter looks
  ASSERT_THAT(admitter_.admitted(), ElementsAre(1));
  EXPECT_EQ(admitter_.num_blocks_free(), 6);
  EXPECT_THAT(t->Wait(Params(absl::Seconds(10), [] { return true; })),
              StatusIs(absl::StatusCode::kCancelled));
  EXPECT_THAT(freed_, ElementsAre(100));
  EXPECT_EQ(admitter_.num_blocks_free(), 10);
}

TEST_F(KvAdmissionQueueTest, ADeadlineRacingTheAdmissionFreesTheAdmittedSequence) {
  auto t = Ticket(1, 4);
  queue_.Enqueue(t, admitter_);
  queue_.AdmitReady(admitter_);
  EXPECT_THAT(t->Wait(Params(absl::ZeroDuration())), StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_THAT(freed_, ElementsAre(100));
  EXPECT_EQ(admitter_.num_blocks_free(), 10);
}

TEST_F(KvAdmissionQueueTest, AWaiterOnAnotherThreadWakesWhenItsAdmissionArrives) {
  admitter_.Use(10);
  auto t = Ticket(1, 3);
  queue_.Enqueue(t, admitter_);
  absl::StatusOr<KvAdmission> got;
  std::thread waiter([&] {
    got = t->Wait({.deadline = absl::Now() + absl::Seconds(10),
                   .poll_interval = absl::Seconds(5)});  // so only the admission can wake it
  });
  absl::SleepFor(absl::Milliseconds(20));
  admitter_.Use(-10);
  const absl::Time admitted_at = absl::Now();
  queue_.AdmitReady(admitter_);
  waiter.join();
  ASSERT_THAT(got, IsOk());
  EXPECT_LT(absl::Now() - admitted_at, absl::Seconds(1));
  EXPECT_EQ(got->blocks.size(), 3u);
}

// Waiters with short deadlines race an engine thread that admits as blocks free: whatever wins each
// race, every block ends up either free or held by a waiter that got its admission.
TEST_F(KvAdmissionQueueTest, NoBlocksLeakWhenManyWaitersRaceTheEngine) {
  FakeAdmitter admitter(8);
  absl::Mutex mu;  // guards queue and pending
  KvAdmissionQueue queue;
  std::vector<std::shared_ptr<KvAdmissionTicket>> pending;
  std::atomic<bool> stop = false;
  std::thread engine([&] {
    while (!stop) {
      {
        absl::MutexLock lock(&mu);
        for (auto& t : pending) queue.Enqueue(std::move(t), admitter);
        pending.clear();
        queue.AdmitReady(admitter);
      }
      absl::SleepFor(absl::Microseconds(200));
    }
  });
  std::atomic<int> num_admitted = 0;
  std::atomic<int> num_gave_up = 0;
  std::vector<std::thread> waiters;
  for (int w = 0; w < 4; ++w) {
    waiters.emplace_back([&, w] {
      for (int i = 0; i < 50; ++i) {
        auto t = Ticket(w, 1 + (i + w) % 4);
        {
          absl::MutexLock lock(&mu);
          pending.push_back(t);
        }
        absl::StatusOr<KvAdmission> got =
            t->Wait({.deadline = absl::Now() + absl::Microseconds(100 * (i % 7)),
                     .poll_interval = absl::Microseconds(300),
                     .free_admitted = [&](SeqId seq_id) { admitter.Free(seq_id); }});
        if (got.ok()) {
          ++num_admitted;
          absl::SleepFor(absl::Microseconds(100));
          admitter.Free(got->seq_id);
        } else {
          ASSERT_THAT(got, StatusIs(absl::StatusCode::kDeadlineExceeded));
          ++num_gave_up;
        }
      }
    });
  }
  for (auto& w : waiters) w.join();
  stop = true;
  engine.join();
  EXPECT_EQ(num_admitted + num_gave_up, 200);
  EXPECT_GT(num_admitted, 0);
  EXPECT_EQ(admitter.num_blocks_free(), 8);
}

}  // namespace
}  // namespace baton::runtime
