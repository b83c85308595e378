// "My run measured 12.1 s; why?": a prediction beside a measured step time,
// where the measurement falls in the prediction's interval, and the single
// setting changes (an overlap off, another recomputation or dispatcher, an
// fp8 recipe, the kernels at the edges of their fitted band) that move the
// prediction toward the measurement, closest first.
#ifndef VTRAIN_CORE_PREDICT_EXPLAIN_H_
#define VTRAIN_CORE_PREDICT_EXPLAIN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/predict/predictor.h"
#include "core/profile/profile.h"
#include "core/spec/job.h"

namespace vtrain {

// One setting of `job` changed: its vtrainctl flags ("--tp-comm-overlap
// off") and the job with it. Only changes that make a valid job.
struct SettingChange {
  std::string change;
  Job job;
};
std::vector<SettingChange> SettingChanges(const Job& job);

struct ExplainCandidate {
  std::string change;
  double iteration_time_ms = 0;
  // The share of the gap between prediction and measurement it closes: 1
  // lands on the measurement, 0 changes nothing, below 0 moves away.
  double closes = 0;
  bool fits = true;  // the changed plan fits in memory
};

struct Explanation {
  double measured_ms = 0;
  double predicted_ms = 0;
  double interval_low_ms = 0, interval_high_ms = 0;
  // "below", "inside" or "above" the prediction's interval.
  std::string position;
  // The changes that move the prediction toward the measurement, closest
  // first; then how many moved it away or changed nothing.
  std::vector<ExplainCandidate> toward;
  int64_t away = 0;
};

// Predicts every SettingChange of `job` (with `options`) and ranks them
// against `measured_ms` (INVALID_ARGUMENT unless positive and finite).
// `base` is the prediction of `job` itself.
absl::StatusOr<Explanation> Explain(const Job& job, const Prediction& base, double measured_ms,
                                    const ProfileSet& profiles, const PredictOptions& options);

}  // namespace vtrain

#endif  // VTRAIN_CORE_PREDICT_EXPLAIN_H_
