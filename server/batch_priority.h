// Long simulations (searches, curves, model plans, cluster simulations,
// kernel-granularity predictions) run at a lower CPU priority than
// operator-granularity predictions, so a client flooding the server with
// them does not delay others' short answers: the slots are shared fairly
// (server/admission.h), and on the cores the kernel prefers the short work.
#ifndef VTRAIN_SERVER_BATCH_PRIORITY_H_
#define VTRAIN_SERVER_BATCH_PRIORITY_H_

#include <functional>
#include <optional>
#include <type_traits>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace vtrain::server {

// The niceness batch work runs at (Linux; elsewhere nothing changes).
inline constexpr int kBatchNiceness = 10;

// Lowers the calling thread's CPU priority to kBatchNiceness and the
// SCHED_IDLE policy (Linux; threads it starts inherit both). Only for a
// thread that ends with its work: an unprivileged thread cannot raise its
// priority back.
void LowerThisThreadsPriority();

// The thread that started batch work, at its own priority. Batch work hands
// it whatever enters gRPC (a stream's Write, a call's Finish): gRPC's
// transport runs other calls' pending work on whichever thread enters it
// and holds locks they wait on, so a batch thread preempted inside gRPC
// would stall other clients' answers until the cores fall idle.
class CallerThread {
 public:
  // Runs `fn` on the caller's thread; returns once it has run. Thread-safe:
  // concurrent calls run one at a time.
  void Run(const std::function<void()>& fn);

 private:
  friend absl::Status RunAtBatchPriority(const std::function<absl::Status(CallerThread&)>& body);
  // The caller's loop: runs what Run hands it until the work is done.
  void Serve();
  void Done();
  bool Served() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return pending_ == nullptr; }
  bool HasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return pending_ != nullptr || done_; }

  absl::Mutex one_at_a_time_;  // among batch threads calling Run
  absl::Mutex mu_;
  const std::function<void()>* pending_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

// Runs `body` on a new thread at batch priority and returns its status;
// the calling thread meanwhile runs what `body` hands to its CallerThread.
absl::Status RunAtBatchPriority(const std::function<absl::Status(CallerThread&)>& body);
// The same for work that hands nothing back.
absl::Status RunAtBatchPriority(const std::function<absl::Status()>& body);

// Runs `work` (taking the CallerThread) at batch priority as above and
// returns what it returned, an absl::StatusOr of the answer.
template <typename Work>
std::invoke_result_t<Work&, CallerThread&> ComputeAtBatchPriority(Work work) {
  std::optional<std::invoke_result_t<Work&, CallerThread&>> result;
  (void)RunAtBatchPriority([&](CallerThread& caller) {
    result.emplace(work(caller));
    return absl::OkStatus();
  });
  return *std::move(result);
}

}  // namespace vtrain::server

#endif  // VTRAIN_SERVER_BATCH_PRIORITY_H_
