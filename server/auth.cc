#include "server/auth.h"

#include <cstddef>

#include "absl/strings/match.h"

namespace vtrain::server {

bool TokenEquals(absl::string_view a, absl::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t longer = a.size() >= b.size() ? a.size() : b.size();
  for (size_t i = 0; i < longer; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

absl::Status CheckBearerToken(std::optional<absl::string_view> authorization,
                              absl::string_view push_token) {
  if (push_token.empty()) {
    return absl::UnauthenticatedError(
        "this server has no push token; start it with --push-token-file");
  }
  if (!authorization.has_value()) {
    return absl::UnauthenticatedError(
        "missing 'authorization: Bearer <token>' metadata; pass --token-file");
  }
  constexpr absl::string_view kPrefix = "Bearer ";
  if (!absl::StartsWith(*authorization, kPrefix) ||
      !TokenEquals(authorization->substr(kPrefix.size()), push_token)) {
    return absl::UnauthenticatedError("the bearer token is wrong");
  }
  return absl::OkStatus();
}

}  // namespace vtrain::server
