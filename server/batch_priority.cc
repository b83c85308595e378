#include "server/batch_priority.h"

#include <thread>

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace vtrain::server {

void LowerThisThreadsPriority() {
#if defined(__linux__)
  // Linux keeps a niceness per thread (its tid); a failure leaves it as it
  // was. Then SCHED_IDLE (no privilege needed): the thread runs only on CPU
  // time no normal thread wants, so a prediction's thread preempts it at
  // once instead of waiting out a time slice. Measured with
  // tests/bench/flood_benchmark on 2 cores: a well-behaved client's p99
  // under an 8-thread search flood 3.2-3.4x its p99 alone, against
  // 6.2-8.1x with the niceness alone; 1.7-1.8x once batch threads stopped
  // entering gRPC (CallerThread; docs/deployment.md). Threads it starts
  // inherit both.
  const auto tid = static_cast<id_t>(syscall(SYS_gettid));
  (void)setpriority(PRIO_PROCESS, tid, kBatchNiceness);
  sched_param param{};
  (void)pthread_setschedparam(pthread_self(), SCHED_IDLE, &param);
#endif
}

void CallerThread::Run(const std::function<void()>& fn) {
  absl::MutexLock turn(&one_at_a_time_);
  absl::MutexLock lock(&mu_);
  pending_ = &fn;
  mu_.Await(absl::Condition(this, &CallerThread::Served));
}

void CallerThread::Serve() {
  mu_.LockWhen(absl::Condition(this, &CallerThread::HasWork));
  while (pending_ != nullptr) {
    const std::function<void()>* fn = pending_;
    mu_.Unlock();
    (*fn)();
    mu_.Lock();
    pending_ = nullptr;  // wakes the batch thread waiting in Run
    mu_.Await(absl::Condition(this, &CallerThread::HasWork));
  }
  mu_.Unlock();
}

void CallerThread::Done() {
  absl::MutexLock lock(&mu_);
  done_ = true;
}

absl::Status RunAtBatchPriority(const std::function<absl::Status(CallerThread&)>& body) {
  CallerThread caller;
  absl::Status status;
  std::thread worker([&] {
    LowerThisThreadsPriority();
    status = body(caller);
    caller.Done();
  });
  caller.Serve();
  worker.join();
  return status;
}

absl::Status RunAtBatchPriority(const std::function<absl::Status()>& body) {
  return RunAtBatchPriority([&](CallerThread&) { return body(); });
}

}  // namespace vtrain::server
