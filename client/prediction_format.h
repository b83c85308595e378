// Renders a PredictResponse for people: the job, the iteration time with its
// interval, throughput, MFU, training time and cost, memory, the per-stage
// breakdown and the fidelity of the lookups. (--json prints the message with
// convert::ToJson instead.)
#ifndef VTRAIN_CLIENT_PREDICTION_FORMAT_H_
#define VTRAIN_CLIENT_PREDICTION_FORMAT_H_

#include <string>

#include "absl/status/statusor.h"
#include "vtrain/v1/vtrain.pb.h"

namespace vtrain::cli {

// The table, read from the response alone (the same bytes for a local and a
// remote answer); `show_lookups` lists every profile lookup. INTERNAL when
// the response does not echo its job.
absl::StatusOr<std::string> PredictionTable(const v1::PredictResponse& response, bool show_lookups);

// What an answer cost, as one line: "simulated 201,600 actions (200,242 by
// periodic jumps) in 85 µs" (with the prediction count when above one).
std::string SimulationLine(const v1::Simulation& simulation);

}  // namespace vtrain::cli

#endif  // VTRAIN_CLIENT_PREDICTION_FORMAT_H_
