#include "common/connection.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/credentials.h"
#include "common/files.h"
#include "core/util/status_macros.h"
#include "proto/json.h"

namespace vtrain::common {

void AddConnectionFlags(FlagParser& f) {
  f.AddValue("server", "HOST:PORT", "the vtrain-server to ask");
  f.AddValue("token-file", "FILE", "file holding the bearer token (push, delete, guarded reads)");
  f.AddValue("tls-ca-file", "FILE", "PEM CA certificate: connect with TLS");
  f.AddValue("tls-cert-file", "FILE", "PEM client certificate (mutual TLS)");
  f.AddValue("tls-key-file", "FILE", "PEM client key (mutual TLS)");
  f.AddValue("timeout", "SECONDS", "deadline of each call (default 30)");
}

void AddLocalOrServerFlags(FlagParser& f, const char* local_help) {
  AddConnectionFlags(f);
  f.AddSwitch("local", local_help);
}

absl::Status CheckLocalOrServer(const FlagParser& flags) {
  if (flags.Has("server") && flags.Switch("local")) {
    return absl::InvalidArgumentError("give either --local or --server, not both");
  }
  return absl::OkStatus();
}

std::unique_ptr<grpc::ClientContext> Connection::Context() const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + timeout);
  if (!token.empty()) ctx->AddMetadata("authorization", "Bearer " + token);
  return ctx;
}

std::shared_ptr<grpc::Channel> Connection::NewChannel(int id) const {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  args.SetMaxSendMessageSize(256 << 20);
  args.SetInt("grpc.channel_id", id);  // distinct arguments: a channel of its own
  return grpc::CreateCustomChannel(target, credentials, args);
}

absl::StatusOr<Connection> Connect(const FlagParser& flags) {
  std::optional<std::string> server = flags.Get("server");
  if (!server || server->empty()) {
    return absl::InvalidArgumentError("--server HOST:PORT is required (or use --local)");
  }
  Connection c;
  if (auto path = flags.Get("token-file")) {
    VTRAIN_ASSIGN_OR_RETURN(c.token, ReadTokenFile("--token-file", *path));
  }
  VTRAIN_ASSIGN_OR_RETURN(std::optional<double> timeout, flags.GetDouble("timeout"));
  if (timeout) {
    if (*timeout <= 0 || *timeout > 86400) {
      return absl::InvalidArgumentError("--timeout must be between 0 and 86400 seconds");
    }
    c.timeout = std::chrono::milliseconds(static_cast<int64_t>(*timeout * 1000));
  }
  VTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> creds,
                          LoadChannelCredentials({
                              .ca_file = flags.Get("tls-ca-file").value_or(""),
                              .cert_file = flags.Get("tls-cert-file").value_or(""),
                              .key_file = flags.Get("tls-key-file").value_or(""),
                          }));
  c.target = *server;
  c.credentials = std::move(creds);
  c.channel = c.NewChannel(0);
  return c;
}

absl::StatusOr<v1::PushProfileSetRequest> ReadProfileSetFile(const std::string& path) {
  VTRAIN_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  v1::PushProfileSetRequest req;
  if (absl::Status s = proto::FromJson(text, req.mutable_profile_set()); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", s.message()));
  }
  return req;
}

absl::Status FromGrpc(const grpc::Status& s) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

std::string PushSummary(const v1::PushProfileSetResponse& response) {
  std::string out = absl::StrCat(
      response.id(),
      response.already_present() ? " (already present; nothing changed)" : " (stored)", "\n");
  if (!response.note().empty()) absl::StrAppend(&out, "note: ", response.note(), "\n");
  return out;
}

}  // namespace vtrain::common
