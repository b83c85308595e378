#include "server/admission.h"

#include <algorithm>
#include <cmath>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"

namespace vtrain::server {
namespace {

int Capacity(int max_concurrent) {
  return max_concurrent > 0 ? max_concurrent
                            : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

int PerClient(const AdmissionLimits& l) {
  const int capacity = Capacity(l.max_concurrent);
  const int reserve = l.reserve >= 0 ? l.reserve : capacity > 1 ? std::max(1, capacity / 4) : 0;
  return std::max(1, capacity - reserve);
}

}  // namespace

AdmissionGate::Slot& AdmissionGate::Slot::operator=(Slot&& other) noexcept {
  if (this != &other) {
    Release();
    gate_ = other.gate_;
    client_ = std::move(other.client_);
    since_ = other.since_;
    other.gate_ = nullptr;
  }
  return *this;
}

void AdmissionGate::Slot::Release() {
  if (gate_ != nullptr) gate_->Leave(client_, absl::Now() - since_);
  gate_ = nullptr;
}

AdmissionGate::AdmissionGate(const AdmissionLimits& limits)
    : capacity_(Capacity(limits.max_concurrent)),
      per_client_(PerClient(limits)),
      max_queued_(limits.max_queued_per_client > 0 ? limits.max_queued_per_client
                                                   : std::max(64, 16 * capacity_)) {}

bool AdmissionGate::MayEnter(const std::string& client, bool waiting) const {
  if (busy_ >= capacity_) return false;
  auto it = clients_.find(client);
  const int holds = it == clients_.end() ? 0 : it->second.busy;
  if (holds >= per_client_) return false;
  for (const auto& [other, c] : clients_) {
    if (other == client || c.waiting == 0) continue;
    if (waiting ? c.busy < holds : c.busy <= holds) return false;
  }
  return true;
}

AdmissionGate::Slot AdmissionGate::Take(const std::string& client) {
  ++busy_;
  ++clients_[client].busy;
  return Slot(this, client);
}

absl::StatusOr<AdmissionGate::Slot> AdmissionGate::Enter(absl::string_view client_view,
                                                         const std::function<bool()>& cancelled) {
  const std::string client(client_view);
  absl::MutexLock lock(&mu_);
  if (MayEnter(client, /*waiting=*/false)) return Take(client);
  Client& c = clients_[client];  // std::map: stays valid while others come and go
  if (c.waiting >= max_queued_) {
    const double retry_ms =
        std::ceil(mean_hold_ms_ * (c.waiting + 1) / std::max(1, std::min(per_client_, c.busy + 1)));
    if (c.busy == 0 && c.waiting == 0) clients_.erase(client);
    absl::Status refused = absl::ResourceExhaustedError(absl::StrCat(
        "client '", client, "' already has ", max_queued_,
        " calls waiting for a simulation slot (the most one client may queue; this server "
        "runs ",
        capacity_, " at once, at most ", per_client_, " per client): retry in about ",
        static_cast<int64_t>(retry_ms), " ms"));
    refused.SetPayload(kRetryPushbackPayload,
                       absl::Cord(absl::StrCat(static_cast<int64_t>(retry_ms))));
    return refused;
  }
  ++c.waiting;
  auto may = [this, &client]()
                 ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return MayEnter(client, /*waiting=*/true); };
  while (!may()) {
    if (cancelled()) {
      if (--c.waiting == 0 && c.busy == 0) clients_.erase(client);
      return absl::CancelledError("cancelled while queued");
    }
    // A timed wait, because cancellation does not signal the mutex.
    mu_.AwaitWithTimeout(absl::Condition(&may), absl::Milliseconds(50));
  }
  --c.waiting;
  return Take(client);
}

std::optional<AdmissionGate::Slot> AdmissionGate::TryEnter(absl::string_view client_view) {
  const std::string client(client_view);
  absl::MutexLock lock(&mu_);
  if (!MayEnter(client, /*waiting=*/false)) return std::nullopt;
  return Take(client);
}

absl::StatusOr<std::vector<AdmissionGate::Slot>> AdmissionGate::EnterWide(
    absl::string_view client, const std::function<bool()>& cancelled) {
  std::vector<Slot> slots;
  absl::StatusOr<Slot> first = Enter(client, cancelled);
  if (!first.ok()) return first.status();
  slots.push_back(*std::move(first));
  while (static_cast<int>(slots.size()) < capacity_) {
    std::optional<Slot> more = TryEnter(client);
    if (!more) break;
    slots.push_back(*std::move(more));
  }
  return slots;
}

void AdmissionGate::Leave(const std::string& client, absl::Duration held) {
  absl::MutexLock lock(&mu_);
  --busy_;
  auto it = clients_.find(client);
  if (it != clients_.end() && --it->second.busy == 0 && it->second.waiting == 0) {
    clients_.erase(it);
  }
  mean_hold_ms_ = 0.9 * mean_hold_ms_ + 0.1 * absl::ToDoubleMilliseconds(held);
}

int AdmissionGate::BusyForTest() const {
  absl::MutexLock lock(&mu_);
  return busy_;
}

}  // namespace vtrain::server
