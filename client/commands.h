// vtrainctl's subcommands. Each takes its arguments (after the subcommand
// name), writes results to `out` and errors to `err`, and returns the exit
// code: 0 success, 2 bad input, 1 any other failure.
#ifndef VTRAIN_CLIENT_COMMANDS_H_
#define VTRAIN_CLIENT_COMMANDS_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/exit_codes.h"
#include "common/flag_parser.h"
#include "core/predict/predictor.h"
#include "core/spec/job.h"
#include "vtrain/v1/vtrain.pb.h"

namespace vtrain::cli {

// Writes "vtrainctl COMMAND: message" to `err` and returns common::ExitCodeFor.
int Fail(std::ostream& err, absl::string_view command, const absl::Status& status);

// Dispatches argv[1..] to a subcommand.
int RunVtrainctl(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

int RunPredict(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int RunPresets(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int RunTrace(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int RunSearch(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int RunCurve(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int RunPlanModel(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int RunClusterSim(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int RunProfiles(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int RunBench(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int RunValidate(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int RunCalibrate(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// The largest simulation a local predict runs unless --max-tasks says otherwise.
inline constexpr int64_t kDefaultMaxTasks = 100'000'000;

// A prediction in this process on the built-in profiles: exactly what a
// server does with the request (JobFromProto, Predict, PredictionToProto).
absl::StatusOr<v1::PredictResponse> PredictLocally(const v1::PredictRequest& request,
                                                   int64_t max_tasks);
// The same request asked of the server of --server (connection flags).
absl::StatusOr<v1::PredictResponse> PredictRemotely(const common::FlagParser& flags,
                                                    const v1::PredictRequest& request);

// Throughput curves in this process (built-in profiles, `threads` at once)
// or from the server of --server: the same response either way.
absl::StatusOr<v1::ThroughputCurveResponse> CurveLocally(const v1::ThroughputCurveRequest& request,
                                                         int threads);
absl::StatusOr<v1::ThroughputCurveResponse> CurveRemotely(
    const common::FlagParser& flags, const v1::ThroughputCurveRequest& request);

// The built-in profile set of `gpu`, its id set to its content hash.
ProfileSet BuiltinProfileSet(const GpuSpec& gpu);

}  // namespace vtrain::cli

#endif  // VTRAIN_CLIENT_COMMANDS_H_
