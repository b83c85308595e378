// The admission gate: a bounded number of slots, freed by their holders;
// a waiting caller leaves when it is cancelled.
#include "server/admission.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace vtrain::server {
namespace {

using ::vtrain::testing::StatusIs;

const auto kNeverCancelled = [] { return false; };

TEST(AdmissionTest, ZeroMeansOneSlotPerHardwareThread) {
  EXPECT_GE(AdmissionGate(0).capacity(), 1);
  EXPECT_EQ(AdmissionGate(3).capacity(), 3);
}

TEST(AdmissionTest, SlotsAreCountedAndFreedWhenReleased) {
  AdmissionGate gate(AdmissionLimits{.max_concurrent = 2, .reserve = 0});
  VTRAIN_ASSERT_OK_AND_ASSIGN(AdmissionGate::Slot a, gate.Enter(kNeverCancelled));
  {
    VTRAIN_ASSERT_OK_AND_ASSIGN(AdmissionGate::Slot b, gate.Enter(kNeverCancelled));
    EXPECT_EQ(gate.BusyForTest(), 2);
    AdmissionGate::Slot moved = std::move(b);
    EXPECT_EQ(gate.BusyForTest(), 2);
  }
  EXPECT_EQ(gate.BusyForTest(), 1);
  a.Release();
  a.Release();  // idempotent
  EXPECT_EQ(gate.BusyForTest(), 0);
}

TEST(AdmissionTest, AFullGateWaitsForAFreeSlot) {
  AdmissionGate gate(1);
  VTRAIN_ASSERT_OK_AND_ASSIGN(AdmissionGate::Slot held, gate.Enter(kNeverCancelled));
  std::atomic<bool> admitted{false};
  std::thread waiter([&] {
    absl::StatusOr<AdmissionGate::Slot> slot = gate.Enter(kNeverCancelled);
    admitted = slot.ok();
  });
  held.Release();  // the waiter gets in whether it started waiting yet or not
  waiter.join();
  EXPECT_TRUE(admitted);
  EXPECT_EQ(gate.BusyForTest(), 0);
}

TEST(AdmissionTest, ACancelledWaiterLeavesWithoutASlot) {
  AdmissionGate gate(1);
  VTRAIN_ASSERT_OK_AND_ASSIGN(AdmissionGate::Slot held, gate.Enter(kNeverCancelled));
  int polls = 0;
  // Cancelled on its second look, so it has waited once.
  EXPECT_THAT(gate.Enter([&] { return ++polls >= 2; }), StatusIs(absl::StatusCode::kCancelled));
  EXPECT_EQ(gate.BusyForTest(), 1);
}

TEST(AdmissionTest, TryEnterTakesOnlyAFreeSlotWithoutWaiting) {
  AdmissionGate gate(AdmissionLimits{.max_concurrent = 2, .reserve = 0});
  std::optional<AdmissionGate::Slot> a = gate.TryEnter();
  std::optional<AdmissionGate::Slot> b = gate.TryEnter();
  ASSERT_TRUE(a.has_value() && b.has_value());
  EXPECT_FALSE(gate.TryEnter().has_value());
  EXPECT_EQ(gate.BusyForTest(), 2);
  a.reset();
  EXPECT_EQ(gate.BusyForTest(), 1);
  EXPECT_TRUE(gate.TryEnter().has_value());
}

TEST(AdmissionTest, OneClientLeavesTheReservedSlotsToOthers) {
  // 8 slots, a quarter (2) reserved: one client holds at most 6.
  AdmissionGate gate(8);
  EXPECT_EQ(gate.per_client(), 6);
  VTRAIN_ASSERT_OK_AND_ASSIGN(std::vector<AdmissionGate::Slot> flood,
                              gate.EnterWide("flooder", kNeverCancelled));
  EXPECT_EQ(flood.size(), 6u);
  EXPECT_FALSE(gate.TryEnter("flooder").has_value());
  // Another client gets in at once, twice.
  std::optional<AdmissionGate::Slot> a = gate.TryEnter("other");
  std::optional<AdmissionGate::Slot> b = gate.TryEnter("other");
  EXPECT_TRUE(a.has_value() && b.has_value());
  EXPECT_EQ(gate.BusyForTest(), 8);
  // On one slot nothing is reserved; on two, one.
  EXPECT_EQ(AdmissionGate(1).per_client(), 1);
  EXPECT_EQ(AdmissionGate(2).per_client(), 1);
}

TEST(AdmissionTest, AFreedSlotGoesToTheWaitingClientHoldingFewest) {
  AdmissionGate gate(AdmissionLimits{.max_concurrent = 2, .reserve = 0});
  VTRAIN_ASSERT_OK_AND_ASSIGN(AdmissionGate::Slot f1, gate.Enter("flooder", kNeverCancelled));
  VTRAIN_ASSERT_OK_AND_ASSIGN(AdmissionGate::Slot f2, gate.Enter("flooder", kNeverCancelled));
  std::atomic<bool> flooder_in{false}, other_in{false}, done{false};
  auto waiter = [&](const char* client, std::atomic<bool>& in) {
    return std::thread([&, client] {
      absl::StatusOr<AdmissionGate::Slot> s = gate.Enter(client, kNeverCancelled);
      in = s.ok();
      while (!done) absl::SleepFor(absl::Milliseconds(1));
    });
  };
  // The flooder queues first, then a client holding nothing.
  std::thread flooder = waiter("flooder", flooder_in);
  absl::SleepFor(absl::Milliseconds(30));
  std::thread other = waiter("other", other_in);
  absl::SleepFor(absl::Milliseconds(30));
  f1.Release();  // the flooder now holds one; the other client none: it goes first
  for (int i = 0; i < 2000 && !other_in; ++i) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_TRUE(other_in);
  EXPECT_FALSE(flooder_in);
  f2.Release();  // then the flooder
  for (int i = 0; i < 2000 && !flooder_in; ++i) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_TRUE(flooder_in);
  done = true;
  flooder.join();
  other.join();
  EXPECT_EQ(gate.BusyForTest(), 0);
}

TEST(AdmissionTest, AClientWithTooManyQueuedCallsIsToldToRetry) {
  AdmissionGate gate(AdmissionLimits{.max_concurrent = 1, .max_queued_per_client = 2});
  VTRAIN_ASSERT_OK_AND_ASSIGN(AdmissionGate::Slot held, gate.Enter("flooder", kNeverCancelled));
  std::atomic<bool> stop{false};
  std::vector<std::thread> queued;
  for (int i = 0; i < 2; ++i) {
    queued.emplace_back([&] { (void)gate.Enter("flooder", [&] { return stop.load(); }); });
  }
  // Once both are queued, a third call from the same client is refused.
  absl::Status refused;
  for (int tries = 0; tries < 200; ++tries) {
    absl::StatusOr<AdmissionGate::Slot> s = gate.Enter("flooder", [] { return true; });
    if (s.status().code() == absl::StatusCode::kResourceExhausted) {
      refused = s.status();
      break;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(std::string(refused.message()),
              ::testing::AllOf(::testing::HasSubstr("client 'flooder' already has 2 calls"),
                               ::testing::ContainsRegex("retry in about [0-9]+ ms")));
  // Another client still queues (and leaves when cancelled).
  EXPECT_THAT(gate.Enter("other", [] { return true; }), StatusIs(absl::StatusCode::kCancelled));
  stop = true;
  for (std::thread& t : queued) t.join();
  EXPECT_EQ(gate.BusyForTest(), 1);
}

}  // namespace
}  // namespace vtrain::server
