#include "server/batch_priority.h"

#include <thread>

#if defined(__linux__)
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace vtrain::server {

void LowerThisThreadsPriority() {
#if defined(__linux__)
  // Linux keeps a niceness per thread (its tid); a failure leaves it as it was.
  const auto tid = static_cast<id_t>(syscall(SYS_gettid));
  (void)setpriority(PRIO_PROCESS, tid, kBatchNiceness);
#endif
}

absl::Status RunAtBatchPriority(const std::function<absl::Status()>& body) {
  absl::Status status;
  std::thread worker([&] {
    LowerThisThreadsPriority();
    status = body();
  });
  worker.join();
  return status;
}

}  // namespace vtrain::server
