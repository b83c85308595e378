// Long simulations (searches, curves, model plans, cluster simulations,
// kernel-granularity predictions) run at a lower CPU priority than
// operator-granularity predictions, so a client flooding the server with
// them does not delay others' short answers: the slots are shared fairly
// (server/admission.h), and on the cores the kernel prefers the short work.
#ifndef VTRAIN_SERVER_BATCH_PRIORITY_H_
#define VTRAIN_SERVER_BATCH_PRIORITY_H_

#include <functional>

#include "absl/status/status.h"

namespace vtrain::server {

// The niceness batch work runs at (Linux; elsewhere nothing changes).
inline constexpr int kBatchNiceness = 10;

// Lowers the calling thread's CPU priority to kBatchNiceness and the
// SCHED_IDLE policy (Linux; threads it starts inherit both). Only for a
// thread that ends with its work: an unprivileged thread cannot raise its
// priority back.
void LowerThisThreadsPriority();

// Runs `body` on a new thread at batch priority and returns its status.
absl::Status RunAtBatchPriority(const std::function<absl::Status()>& body);

}  // namespace vtrain::server

#endif  // VTRAIN_SERVER_BATCH_PRIORITY_H_
