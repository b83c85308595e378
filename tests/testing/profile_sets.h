// Profile sets for tests and benchmarks (no GoogleTest dependency, so the
// soak benchmark shares it).
#ifndef VTRAIN_TESTS_TESTING_PROFILE_SETS_H_
#define VTRAIN_TESTS_TESTING_PROFILE_SETS_H_

#include <cstdint>

#include "vtrain/v1/vtrain.pb.h"

namespace vtrain::testing {

// A measured-looking A100 set: the built-in parameters and one attention_fwd
// kernel table (h 2048, 16 heads, s 2048, b 1, t 2) whose one kernel lasts
// `duration_ns`; distinct durations give distinct content, hence ids.
// It carries the built-in error bands too, so it is a complete set
// (server/profile_catalog.h: IsComplete).
v1::ProfileSet MeasuredSet(int64_t duration_ns);
// The same table without error bands: a partial set, laid over the newest
// complete set rather than becoming the default.
v1::ProfileSet PartialSet(int64_t duration_ns);

}  // namespace vtrain::testing

#endif  // VTRAIN_TESTS_TESTING_PROFILE_SETS_H_
