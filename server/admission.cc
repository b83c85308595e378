#include "server/admission.h"

#include <algorithm>
#include <thread>

#include "absl/time/time.h"

namespace vtrain::server {

AdmissionGate::Slot& AdmissionGate::Slot::operator=(Slot&& other) noexcept {
  if (this != &other) {
    Release();
    gate_ = other.gate_;
    other.gate_ = nullptr;
  }
  return *this;
}

void AdmissionGate::Slot::Release() {
  if (gate_ != nullptr) gate_->Leave();
  gate_ = nullptr;
}

AdmissionGate::AdmissionGate(int max_concurrent)
    : capacity_(max_concurrent > 0
                    ? max_concurrent
                    : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))) {}

absl::StatusOr<AdmissionGate::Slot> AdmissionGate::Enter(const std::function<bool()>& cancelled) {
  absl::MutexLock lock(&mu_);
  auto free_slot = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return busy_ < capacity_; };
  while (!free_slot()) {
    if (cancelled()) return absl::CancelledError("cancelled while queued");
    // A timed wait, because cancellation does not signal the mutex.
    mu_.AwaitWithTimeout(absl::Condition(&free_slot), absl::Milliseconds(50));
  }
  ++busy_;
  return Slot(this);
}

std::optional<AdmissionGate::Slot> AdmissionGate::TryEnter() {
  absl::MutexLock lock(&mu_);
  if (busy_ >= capacity_) return std::nullopt;
  ++busy_;
  return Slot(this);
}

absl::StatusOr<std::vector<AdmissionGate::Slot>> AdmissionGate::EnterWide(
    const std::function<bool()>& cancelled) {
  std::vector<Slot> slots;
  absl::StatusOr<Slot> first = Enter(cancelled);
  if (!first.ok()) return first.status();
  slots.push_back(*std::move(first));
  while (static_cast<int>(slots.size()) < capacity_) {
    std::optional<Slot> more = TryEnter();
    if (!more) break;
    slots.push_back(*std::move(more));
  }
  return slots;
}

void AdmissionGate::Leave() {
  absl::MutexLock lock(&mu_);
  --busy_;
}

int AdmissionGate::BusyForTest() const {
  absl::MutexLock lock(&mu_);
  return busy_;
}

}  // namespace vtrain::server
