#include "server/client_key.h"

#include <cstdint>
#include <functional>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace vtrain::server {

std::string ClientKey(const grpc::ServerContextBase& context) {
  const auto& metadata = context.client_metadata();
  if (auto it = metadata.find("x-vtrain-client"); it != metadata.end()) {
    const absl::string_view name(it->second.data(), it->second.size());
    bool printable = !name.empty() && name.size() <= 64;
    for (char c : name) printable = printable && absl::ascii_isgraph(static_cast<unsigned char>(c));
    if (printable) return absl::StrCat("name:", name);
  }
  if (auto it = metadata.find("authorization"); it != metadata.end()) {
    const std::string token(it->second.data(), it->second.size());
    return absl::StrFormat("token:%016x", static_cast<uint64_t>(std::hash<std::string>()(token)));
  }
  // "ipv4:10.0.0.7:51234", "ipv6:[::1]:51234", "unix:/path": the host.
  std::string peer = context.peer();
  if (absl::StartsWith(peer, "ipv4:") || absl::StartsWith(peer, "ipv6:")) {
    const size_t colon = peer.rfind(':');
    if (colon != std::string::npos && colon > 5) peer.resize(colon);
  }
  return absl::StrCat("peer:", peer);
}

}  // namespace vtrain::server
