// Internal to proto/yaml_reader.cc: the character-level pieces of the YAML
// reader (quoted scalars, comments, nulls).
#ifndef VTRAIN_PROTO_YAML_SCALARS_H_
#define VTRAIN_PROTO_YAML_SCALARS_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace vtrain::proto::internal {

// The index of the closing quote of the quoted scalar starting at s[i], or
// npos when it does not close on this line.
size_t QuoteEnd(absl::string_view s, size_t i);

// The line without its comment ('#' at the start or after a blank, outside
// quotes); INVALID_ARGUMENT for a quote that does not close on the line.
absl::StatusOr<std::string> StripComment(absl::string_view s);

// Whether a plain scalar is null (empty, ~, null, Null, NULL).
bool IsNullText(absl::string_view t);

// The value of the quoted scalar s[i..end] (single-quoted: '' is a quote;
// double-quoted: the escapes \\ \" \/ \n \t \0 \xNN \uNNNN).
absl::StatusOr<std::string> Unquote(absl::string_view s, size_t i, size_t end);

}  // namespace vtrain::proto::internal

#endif  // VTRAIN_PROTO_YAML_SCALARS_H_
