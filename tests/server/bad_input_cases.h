// The bad-input catalogue's case type and shared constants
// (bad_input_test.cc), and its profile-set cases (bad_push_cases.cc).
#ifndef VTRAIN_TESTS_SERVER_BAD_INPUT_CASES_H_
#define VTRAIN_TESTS_SERVER_BAD_INPUT_CASES_H_

#include <functional>
#include <limits>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "vtrain/v1/vtrain.pb.h"

namespace vtrain::server {

inline constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();

// One request built from a valid one with exactly one defect.
template <typename Request>
struct Case {
  const char* name;
  std::function<void(Request&)> mutate;
  grpc::StatusCode code;
  const char* says;  // a substring the message must hold (the field, or the limit)
};

inline constexpr auto kBad = grpc::StatusCode::INVALID_ARGUMENT;
inline constexpr auto kTooBig = grpc::StatusCode::RESOURCE_EXHAUSTED;
inline constexpr auto kAbsent = grpc::StatusCode::NOT_FOUND;

// Pushed profile sets with one defect each (from testing::MeasuredSet).
std::vector<Case<v1::ProfileSet>> PushCases();

}  // namespace vtrain::server

#endif  // VTRAIN_TESTS_SERVER_BAD_INPUT_CASES_H_
