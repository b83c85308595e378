// Reads nccl-tests output (all_reduce_perf and friends) into a collective
// latency curve; vtrainctl validate/calibrate and vtrain-agent import use it.
#ifndef VTRAIN_COMMON_NCCL_TESTS_H_
#define VTRAIN_COMMON_NCCL_TESTS_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/profile/profile.h"

namespace vtrain::common {

// Parses nccl-tests output (all_reduce_perf and friends): lines of size
// (bytes), count, type, then out-of-place time (ns) ...; '#' lines and
// headers are skipped. Returns the out-of-place latency curve.
absl::StatusOr<CollectiveCurve> ParseNcclTests(absl::string_view text, absl::string_view name);

}  // namespace vtrain::common

#endif  // VTRAIN_COMMON_NCCL_TESTS_H_
