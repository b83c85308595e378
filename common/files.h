// Reading and writing whole files, with errors that name the path; shared by
// vtrainctl, vtrain-agent and vtrain-server.
#ifndef VTRAIN_COMMON_FILES_H_
#define VTRAIN_COMMON_FILES_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace vtrain::common {

// Reads one file: NOT_FOUND or INVALID_ARGUMENT naming the path.
absl::StatusOr<std::string> ReadFile(const std::string& path);
// Writes one file, replacing it (errors name the path).
absl::Status WriteFile(const std::string& path, const std::string& contents);

}  // namespace vtrain::common

#endif  // VTRAIN_COMMON_FILES_H_
