#include "server/method_runner.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "server/admission.h"
#include "server/auth.h"
#include "server/log.h"
#include "server/status.h"

namespace vtrain::server {

absl::Status MethodRunner::Admit(const grpc::ServerContextBase& context, const Method& method,
                                 const google::protobuf::Message& request) const {
  if (const size_t bytes = request.ByteSizeLong();
      bytes > static_cast<size_t>(policy_.max_message_bytes)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the request is ", bytes, " bytes, over this server's limit of ",
                     policy_.max_message_bytes, " (--max-message-bytes)"));
  }
  switch (method.access) {
    case Access::kWrite:
      if (absl::Status s = CheckToken(context, method); !s.ok()) return s;
      return method.role_refusal;
    case Access::kRead:
      if (!method.role_refusal.ok()) return method.role_refusal;
      return policy_.require_auth_for_reads ? CheckToken(context, method) : absl::OkStatus();
  }
  return absl::InternalError("unknown access kind");
}

absl::Status MethodRunner::CheckToken(const grpc::ServerContextBase& context,
                                      const Method& method) const {
  const auto& metadata = context.client_metadata();
  std::optional<absl::string_view> authorization;
  if (auto it = metadata.find("authorization"); it != metadata.end()) {
    authorization = absl::string_view(it->second.data(), it->second.size());
  }
  absl::Status s = CheckBearerToken(authorization, policy_.push_token);
  if (!s.ok()) {
    // Who and what, never the token.
    Log(absl::StrCat("refused ", method.name, " from ", context.peer(), ": ", s.message()));
  }
  return s;
}

grpc::Status MethodRunner::Finish(grpc::ServerContextBase& context, const Method& method,
                                  absl::Time start, const absl::Status& status) const {
  if (auto retry_ms = status.GetPayload(kRetryPushbackPayload)) {
    context.AddTrailingMetadata("grpc-retry-pushback-ms", std::string(*retry_ms));
  }
  grpc::Status converted = ToGrpcStatus(status);
  metrics_.Request(method.name, StatusCodeName(converted.error_code()),
                   absl::ToDoubleSeconds(absl::Now() - start));
  return converted;
}

}  // namespace vtrain::server
