// The admission gate: a bounded number of slots, freed by their holders;
// a waiting caller leaves when it is cancelled.
#include "server/admission.h"

#include <atomic>
#include <thread>

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
  AdmissionGate gate(2);
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
  AdmissionGate gate(2);
  std::optional<AdmissionGate::Slot> a = gate.TryEnter();
  std::optional<AdmissionGate::Slot> b = gate.TryEnter();
  ASSERT_TRUE(a.has_value() && b.has_value());
  EXPECT_FALSE(gate.TryEnter().has_value());
  EXPECT_EQ(gate.BusyForTest(), 2);
  a.reset();
  EXPECT_EQ(gate.BusyForTest(), 1);
  EXPECT_TRUE(gate.TryEnter().has_value());
}

}  // namespace
}  // namespace vtrain::server
