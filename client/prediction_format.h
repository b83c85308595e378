// Renders a prediction for people (a table) and for machines (JSON).
#ifndef VTRAIN_CLIENT_PREDICTION_FORMAT_H_
#define VTRAIN_CLIENT_PREDICTION_FORMAT_H_

#include <string>

#include "core/predict/predictor.h"
#include "core/spec/job.h"

namespace vtrain::cli {

std::string PredictionTable(const Job& job, const Prediction& prediction, bool show_lookups);

// One JSON object; "iteration_time_ms" is the headline field.
std::string PredictionJson(const Job& job, const Prediction& prediction);

}  // namespace vtrain::cli

#endif  // VTRAIN_CLIENT_PREDICTION_FORMAT_H_
