// A profile set's numbers checked by what they predict: fixed probe jobs on
// the set's GPU must come out physical (positive finite times, utilisation at
// most 100%, a sensible interval). A set that passes field validation can
// still be absurd in combination; the registry refuses such sets.
#ifndef VTRAIN_CORE_PREDICT_SANITY_H_
#define VTRAIN_CORE_PREDICT_SANITY_H_

#include "absl/status/status.h"
#include "core/profile/profile.h"

namespace vtrain {

// OK, or INVALID_ARGUMENT naming the probe job and what was unphysical. A set
// for a GPU model vtrain does not know is not probed (no job can use it).
absl::Status CheckPredictionsArePhysical(const ProfileSet& set);

}  // namespace vtrain

#endif  // VTRAIN_CORE_PREDICT_SANITY_H_
