// A core Prediction as a vtrain.v1.PredictResponse, and back (for printing a
// response as a table).
#ifndef VTRAIN_PROTO_PREDICTION_CONVERT_H_
#define VTRAIN_PROTO_PREDICTION_CONVERT_H_

#include "core/predict/explain.h"
#include "core/predict/predictor.h"
#include "core/spec/job.h"
#include "core/spec/settings.h"
#include "vtrain/v1/vtrain.pb.h"

namespace vtrain::proto {

// Fills `out` with the prediction of `job`, the job echoed with its defaults.
void PredictionToProto(const Job& job, const Prediction& prediction, v1::PredictResponse* out);

// An explanation of a measured step time (PredictResponse.explanation).
void ExplanationToProto(const Explanation& e, v1::Explanation* out);

// The settings a job ran with (plan.settings), for people.
void SettingsToProto(const SettingsReport& report, v1::SettingsReport* out);

// What an answer cost (the Simulation message of every result), and back.
void SimulationToProto(const SimulationCost& cost, v1::Simulation* out);
SimulationCost SimulationFromProto(const v1::Simulation& simulation);

// The prediction a response carries (fields a response does not carry, such
// as per-task data, stay empty).
Prediction PredictionFromProto(const v1::PredictResponse& response);

}  // namespace vtrain::proto

#endif  // VTRAIN_PROTO_PREDICTION_CONVERT_H_
