// The one JSON form of vtrain.v1 messages, for files and for every --json
// output: the protobuf JSON mapping with field names as written in the .proto
// (snake_case), enums as names, 64-bit integers as numbers, every scalar and
// repeated field printed even when zero or empty, two-space indentation.
// Unset sub-messages are left out (their presence means something, e.g.
// SearchResult.best). Parsing accepts any valid protobuf JSON.
#ifndef VTRAIN_PROTO_JSON_H_
#define VTRAIN_PROTO_JSON_H_

#include <string>

#include "absl/status/status.h"
#include "google/protobuf/message.h"

namespace vtrain::proto {

// `message` as JSON, ending in a newline. Deterministic: the same message
// prints the same bytes. Non-finite doubles print as "NaN", "Infinity" and
// "-Infinity" (strings, as the protobuf mapping writes them).
std::string ToJson(const google::protobuf::Message& message);

// Parses protobuf JSON into `message` (unknown fields and a key given twice
// in one object refused): INVALID_ARGUMENT naming the message type and the
// parser's complaint or the repeated key.
absl::Status FromJson(const std::string& json, google::protobuf::Message* message);

}  // namespace vtrain::proto

#endif  // VTRAIN_PROTO_JSON_H_
