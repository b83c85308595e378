// The exit codes of vtrainctl and vtrain-agent: 0 success, 2 bad input (the
// message names the field and the fix), 1 any other failure.
#ifndef VTRAIN_COMMON_EXIT_CODES_H_
#define VTRAIN_COMMON_EXIT_CODES_H_

#include "absl/status/status.h"

namespace vtrain::common {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitBadInput = 2;

// The exit code for a failed status: kExitBadInput for INVALID_ARGUMENT,
// NOT_FOUND and OUT_OF_RANGE, else kExitFailure.
inline int ExitCodeFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kOutOfRange:
      return kExitBadInput;
    default:
      return kExitFailure;
  }
}

}  // namespace vtrain::common

#endif  // VTRAIN_COMMON_EXIT_CODES_H_
