// What vtrainctl validate and calibrate share: the measured runs and the
// built-in profile set of their GPU (--measurements, --nccl-dir, --threads),
// and the error tables both print.
#ifndef VTRAIN_CLIENT_ACCURACY_COMMON_H_
#define VTRAIN_CLIENT_ACCURACY_COMMON_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/flag_parser.h"
#include "core/calibrate/calibration.h"
#include "core/profile/profile.h"

namespace vtrain::client {

// Adds --measurements, --nccl-dir and --threads.
void AddSetupFlags(common::FlagParser& f);

struct Inputs {
  std::vector<Measurement> measurements;
  ProfileSet profiles;  // the built-in set of the measurements' GPU
  std::vector<std::pair<int64_t, CollectiveCurve>> nccl_curves;
  int threads = 1;
};

// Reads the flags' files (measured or published rows, ParseAnyMeasurementCsv).
// INVALID_ARGUMENT for a missing --measurements, a bad row, no rows, or rows
// on more than one GPU.
absl::StatusOr<Inputs> LoadInputs(const common::FlagParser& flags);

// "12.34%".
std::string Pct(double fraction);
// Per regime: the error beside the interval's coverage and median width.
std::string RegimeTable(const std::vector<RegimeCoverage>& regimes, const std::string& title);
// The summary, groups, regimes and the `worst` rows of a validation.
std::string ReportTable(const std::vector<Measurement>& m, const ValidationReport& r, int worst);

}  // namespace vtrain::client

#endif  // VTRAIN_CLIENT_ACCURACY_COMMON_H_
