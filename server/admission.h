// Admission control for simulations: at most a fixed number run at once, and
// shared fairly between clients. Each call names its client (ClientKey in
// server/client_key.h); one client holds at most capacity - reserve slots,
// so a client flooding the server with searches always leaves slots for the
// others; a freed slot goes to the waiting client that holds the fewest; a
// client with too many calls already queued is refused RESOURCE_EXHAUSTED
// with a retry hint. Waiters leave when their caller cancels (or its
// deadline passes).
#ifndef VTRAIN_SERVER_ADMISSION_H_
#define VTRAIN_SERVER_ADMISSION_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace vtrain::server {

struct AdmissionLimits {
  int max_concurrent = 0;  // slots; 0: one per hardware thread
  // Slots one client can never take, kept for the others; -1: a quarter of
  // the slots, at least one (none with a single slot).
  int reserve = -1;
  // Calls one client may have waiting; over it, RESOURCE_EXHAUSTED. 0:
  // sixteen per slot, at least 64.
  int max_queued_per_client = 0;
};

// The payload a refusal's status carries: how many milliseconds the client
// should wait before retrying, which the call's trailers repeat as gRPC's
// grpc-retry-pushback-ms (MethodRunner::Finish), so a channel with a retry
// policy waits that long by itself.
inline constexpr char kRetryPushbackPayload[] = "vtrain.dev/retry-pushback-ms";

class AdmissionGate {
 public:
  // A held slot; destroying (or resetting) it frees the slot. Move-only.
  class Slot {
   public:
    Slot(Slot&& other) noexcept
        : gate_(other.gate_), client_(std::move(other.client_)), since_(other.since_) {
      other.gate_ = nullptr;
    }
    Slot& operator=(Slot&& other) noexcept;
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot() { Release(); }
    void Release();

   private:
    friend class AdmissionGate;
    Slot(AdmissionGate* gate, std::string client)
        : gate_(gate), client_(std::move(client)), since_(absl::Now()) {}
    AdmissionGate* gate_;  // not owned; nullptr once released
    std::string client_;
    absl::Time since_;
  };

  explicit AdmissionGate(int max_concurrent) : AdmissionGate(AdmissionLimits{max_concurrent}) {}
  explicit AdmissionGate(const AdmissionLimits& limits);
  AdmissionGate(const AdmissionGate&) = delete;
  AdmissionGate& operator=(const AdmissionGate&) = delete;

  // How many simulations may run at once (also the thread count a search
  // spreads over), and the most one client may hold.
  int capacity() const { return capacity_; }
  int per_client() const { return per_client_; }

  // Waits for a slot `client` may take, polling `cancelled` every 50 ms.
  // CANCELLED ("cancelled while queued") when `cancelled` turns true first;
  // RESOURCE_EXHAUSTED (naming the client, with a retry hint) when the
  // client already has max_queued_per_client calls waiting. Thread-safe.
  // The gate must outlive the slot.
  absl::StatusOr<Slot> Enter(absl::string_view client, const std::function<bool()>& cancelled);
  absl::StatusOr<Slot> Enter(const std::function<bool()>& cancelled) {
    return Enter("", cancelled);
  }
  // A slot now, or nullopt without waiting: none is free, the client holds
  // its share, or another client holding no more is waiting for it.
  std::optional<Slot> TryEnter(absl::string_view client = "");
  // One slot, waited for as Enter waits, then as many more as TryEnter
  // gives now: for work that spreads over threads, one per slot (searches,
  // curves). As Enter.
  absl::StatusOr<std::vector<Slot>> EnterWide(absl::string_view client,
                                              const std::function<bool()>& cancelled);
  absl::StatusOr<std::vector<Slot>> EnterWide(const std::function<bool()>& cancelled) {
    return EnterWide("", cancelled);
  }

  int BusyForTest() const;

 private:
  struct Client {
    int busy = 0;
    int waiting = 0;
  };
  // Whether `client` may take a free slot now: `waiting` says it is one of
  // the waiters (then a waiter holding strictly fewer goes first; otherwise
  // one holding no more).
  bool MayEnter(const std::string& client, bool waiting) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Slot Take(const std::string& client) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Leave(const std::string& client, absl::Duration held);

  const int capacity_, per_client_, max_queued_;
  mutable absl::Mutex mu_;
  int busy_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, Client> clients_ ABSL_GUARDED_BY(mu_);  // only those busy or waiting
  double mean_hold_ms_ ABSL_GUARDED_BY(mu_) = 10;  // recent slots' holding time (for hints)
};

}  // namespace vtrain::server

#endif  // VTRAIN_SERVER_ADMISSION_H_
