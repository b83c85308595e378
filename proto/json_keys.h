// A check protobuf's JSON parser does not make: the same key twice in one
// JSON object (the parser keeps the last one silently, so a job file with
// "global_batch" twice would predict whichever came last).
#ifndef VTRAIN_PROTO_JSON_KEYS_H_
#define VTRAIN_PROTO_JSON_KEYS_H_

#include <string_view>

#include "absl/status/status.h"

namespace vtrain::proto {

// INVALID_ARGUMENT naming the key and its path ("plan.global_batch") when an
// object holds a key twice. Keys are compared as protobuf's JSON mapping
// reads them: "global_batch" and "globalBatch" are the same field. Text that
// is not well-formed JSON is left for the parser to report (OK here).
// Nesting deeper than 100 levels is refused.
absl::Status CheckNoDuplicateKeys(std::string_view json);

}  // namespace vtrain::proto

#endif  // VTRAIN_PROTO_JSON_KEYS_H_
