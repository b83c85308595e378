// SHA-256 (FIPS 180-4), for content-addressed profile-set ids.
#ifndef VTRAIN_PROTO_SHA256_H_
#define VTRAIN_PROTO_SHA256_H_

#include <string>

#include "absl/strings/string_view.h"

namespace vtrain::proto {

// Lower-case hex digest of `data`.
std::string Sha256Hex(absl::string_view data);

}  // namespace vtrain::proto

#endif  // VTRAIN_PROTO_SHA256_H_
