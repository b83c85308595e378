// Bearer-token checks of vtrain-server, free of gRPC: the caller hands over
// the request's 'authorization' metadata value.
#ifndef VTRAIN_SERVER_AUTH_H_
#define VTRAIN_SERVER_AUTH_H_

#include <optional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace vtrain::server {

// OK when `authorization` is "Bearer <push_token>". UNAUTHENTICATED, saying
// what to do, when the server has no token (`push_token` empty), the
// metadata is absent, or the token differs.
absl::Status CheckBearerToken(std::optional<absl::string_view> authorization,
                              absl::string_view push_token);

// Compares in time that depends only on the longer length, so how much of a
// wrong token matches is not observable through timing.
bool TokenEquals(absl::string_view a, absl::string_view b);

}  // namespace vtrain::server

#endif  // VTRAIN_SERVER_AUTH_H_
