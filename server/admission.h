// Admission control for simulations: at most a fixed number run at once; the
// others wait for a slot until their caller cancels (or its deadline passes).
#ifndef VTRAIN_SERVER_ADMISSION_H_
#define VTRAIN_SERVER_ADMISSION_H_

#include <functional>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace vtrain::server {

class AdmissionGate {
 public:
  // A held slot; destroying (or resetting) it frees the slot. Move-only.
  class Slot {
   public:
    Slot(Slot&& other) noexcept : gate_(other.gate_) { other.gate_ = nullptr; }
    Slot& operator=(Slot&& other) noexcept;
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot() { Release(); }
    void Release();

   private:
    friend class AdmissionGate;
    explicit Slot(AdmissionGate* gate) : gate_(gate) {}
    AdmissionGate* gate_;  // not owned; nullptr once released
  };

  // `max_concurrent` slots; 0 means one per hardware thread (at least one).
  explicit AdmissionGate(int max_concurrent);
  AdmissionGate(const AdmissionGate&) = delete;
  AdmissionGate& operator=(const AdmissionGate&) = delete;

  // How many simulations may run at once (also the thread count a search
  // spreads over).
  int capacity() const { return capacity_; }

  // Waits for a free slot, polling `cancelled` every 50 ms while it waits.
  // CANCELLED ("cancelled while queued") when `cancelled` turns true first.
  // Thread-safe. The gate must outlive the slot.
  absl::StatusOr<Slot> Enter(const std::function<bool()>& cancelled);
  // A free slot now, or nullopt without waiting (a search widens itself over
  // the slots nobody else is using). Thread-safe.
  std::optional<Slot> TryEnter();
  // One slot, waited for as Enter waits, then as many more as are free now
  // (at most capacity in all): for work that spreads over threads, one per
  // slot (searches, curves). CANCELLED as Enter.
  absl::StatusOr<std::vector<Slot>> EnterWide(const std::function<bool()>& cancelled);

  int BusyForTest() const;

 private:
  void Leave();

  const int capacity_;
  mutable absl::Mutex mu_;
  int busy_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace vtrain::server

#endif  // VTRAIN_SERVER_ADMISSION_H_
