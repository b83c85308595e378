// Reads nccl-tests output (all_reduce_perf, all_gather_perf,
// reduce_scatter_perf, sendrecv_perf, alltoall_perf) into a collective
// latency curve;
// vtrainctl validate/calibrate and vtrain-agent import use it.
#ifndef VTRAIN_COMMON_NCCL_TESTS_H_
#define VTRAIN_COMMON_NCCL_TESTS_H_

#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/profile/profile.h"

namespace vtrain::common {

// Parses nccl-tests output of any of the five tests: lines of size (bytes,
// nccl-tests' convention: the whole buffer for all-gather and reduce-scatter,
// a rank's send buffer for all-to-all, the message for send/recv), count,
// type, ..., then the out-of-place time.
// The time column comes from the header line ("size count type redop root
// time ..." in nccl-tests 2.13+, "size count type time ..." in older
// all_gather/sendrecv output, "size(B),count,type,time(ns),..." in vTrain's
// copies); without a header, it is the first numeric column after type,
// skipping redop and root. '#' lines and summaries are skipped. Returns the
// out-of-place latency curve, or INVALID_ARGUMENT naming `name` and the line.
absl::StatusOr<CollectiveCurve> ParseNcclTests(absl::string_view text, absl::string_view name);

// Which collective a nccl-tests output measured: from its "# Collective test
// starting: all_gather_perf" line (nccl-tests 2.13+), else from the file
// name (all_reduce/allreduce, all_gather/allgather,
// reduce_scatter/reducescatter, sendrecv/send_recv, alltoall/all_to_all);
// nullopt if neither says.
std::optional<Collective> InferNcclCollective(absl::string_view text, absl::string_view file_name);

}  // namespace vtrain::common

#endif  // VTRAIN_COMMON_NCCL_TESTS_H_
