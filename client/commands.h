// vtrainctl's subcommands. Each takes its arguments (after the subcommand
// name), writes results to `out` and errors to `err`, and returns the exit
// code: 0 success, 2 bad input, 1 any other failure.
#ifndef VTRAIN_CLIENT_COMMANDS_H_
#define VTRAIN_CLIENT_COMMANDS_H_

#include <optional>
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

namespace vtrain::client {

// Writes "vtrainctl COMMAND: message" to `err` and returns common::ExitCodeFor.
int Fail(std::ostream& err, absl::string_view command, const absl::Status& status);

// The prologue every command shares: parses `args` into `flags`; on bad flags
// prints the error (Fail) and returns its exit code; on --help prints `help`
// and the flags' usage and returns kExitOk; otherwise returns nothing and the
// command goes on.
std::optional<int> ParseCommandLine(common::FlagParser& flags, const std::vector<std::string>& args,
                                    absl::string_view command, absl::string_view help,
                                    std::ostream& out, std::ostream& err);

// Dispatches argv[1..] to a subcommand.
int RunVtrainctl(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

int RunPredict(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
// predict with --measured-ms required: the explanation, then the prediction.
int RunExplain(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
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
int RunCompare(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// The same request asked of the server of --server (connection flags). The
// in-process answers (--local) come from service/service.h.
absl::StatusOr<v1::PredictResponse> PredictRemotely(const common::FlagParser& flags,
                                                    const v1::PredictRequest& request);
absl::StatusOr<v1::ThroughputCurveResponse> CurveRemotely(
    const common::FlagParser& flags, const v1::ThroughputCurveRequest& request);

}  // namespace vtrain::client

#endif  // VTRAIN_CLIENT_COMMANDS_H_
