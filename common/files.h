// Reading and writing whole files, with errors that name the path; shared by
// vtrainctl, vtrain-agent and vtrain-server.
#ifndef VTRAIN_COMMON_FILES_H_
#define VTRAIN_COMMON_FILES_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace vtrain::common {

// The largest file ReadFile reads unless told otherwise: job files, profile
// sets, configs, traces and measurements are far smaller.
inline constexpr int64_t kMaxFileBytes = int64_t{256} << 20;

// Reads one regular file of at most `max_bytes`. NOT_FOUND naming the path
// when it does not exist, PERMISSION_DENIED, INVALID_ARGUMENT for a
// directory, a device or pipe (e.g. /dev/zero) or a file over the limit; each
// message names the path and the OS error.
absl::StatusOr<std::string> ReadFile(const std::string& path, int64_t max_bytes = kMaxFileBytes);
// Reads standard input to its end, refusing more than `max_bytes`
// (INVALID_ARGUMENT naming the limit).
absl::StatusOr<std::string> ReadStdin(int64_t max_bytes);
// Writes one file, replacing it (errors name the path and the OS error).
absl::Status WriteFile(const std::string& path, const std::string& contents);

}  // namespace vtrain::common

#endif  // VTRAIN_COMMON_FILES_H_
