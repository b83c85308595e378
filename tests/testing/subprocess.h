// Runs a built binary in a child process with a time limit and captures its
// exit code, stdout and stderr, for end-to-end tests.
#ifndef VTRAIN_TESTS_TESTING_SUBPROCESS_H_
#define VTRAIN_TESTS_TESTING_SUBPROCESS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace vtrain::testing {

struct ProcessResult {
  int exit_code = -1;  // the exit status; -1 when killed by a signal
  std::string out;     // stdout
  std::string err;     // stderr
};

// Runs `binary` with `args` (no shell), stdin from /dev/null. Kills it and
// returns DEADLINE_EXCEEDED if it runs longer than `timeout_s`; INTERNAL if
// it cannot be started.
absl::StatusOr<ProcessResult> RunProcess(const std::string& binary,
                                         const std::vector<std::string>& args,
                                         double timeout_s = 120);

}  // namespace vtrain::testing

#endif  // VTRAIN_TESTS_TESTING_SUBPROCESS_H_
