// Talking to a vtrain-server from vtrainctl and vtrain-agent: the connection
// flags, the channel (plain or TLS), bearer token and deadline.
#ifndef VTRAIN_COMMON_CONNECTION_H_
#define VTRAIN_COMMON_CONNECTION_H_

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/flag_parser.h"
#include "grpcpp/grpcpp.h"
#include "vtrain/v1/vtrain.pb.h"

namespace vtrain::common {

// Declares --server, --token-file, --tls-ca-file, --tls-cert-file,
// --tls-key-file and --timeout.
void AddConnectionFlags(FlagParser& flags);

// For a command that runs in this process or on a server: the connection
// flags and --local (`local_help` says what it does here).
void AddLocalOrServerFlags(FlagParser& flags, const char* local_help);
// INVALID_ARGUMENT when both --local and --server are given.
absl::Status CheckLocalOrServer(const FlagParser& flags);

struct Connection {
  std::shared_ptr<grpc::Channel> channel;
  std::string target;                                     // HOST:PORT of --server
  std::shared_ptr<grpc::ChannelCredentials> credentials;  // plain or TLS, per the flags
  std::string token;                                      // empty: none
  std::chrono::milliseconds timeout{30000};

  // A context with the deadline and, when a token is set, the bearer token.
  std::unique_ptr<grpc::ClientContext> Context() const;
  // Another channel to the same server with the same credentials, apart from
  // `channel` (its own connection, for load generators): `id` tells them apart.
  std::shared_ptr<grpc::Channel> NewChannel(int id) const;
};

// From the flags; INVALID_ARGUMENT when --server is missing or a file does
// not read.
absl::StatusOr<Connection> Connect(const FlagParser& flags);

// What a push did, for people: "ID (stored)" or "ID (already present;
// nothing changed)", then the server's note on the GPU's default, if any.
std::string PushSummary(const v1::PushProfileSetResponse& response);

// A profile-set JSON file (the vtrain.v1.ProfileSet JSON form) as a push
// request; an error naming the file when it cannot be read or parsed.
absl::StatusOr<v1::PushProfileSetRequest> ReadProfileSetFile(const std::string& path);

// The reverse of the server's ToGrpcStatus: the same code and message.
absl::Status FromGrpc(const grpc::Status& s);

}  // namespace vtrain::common

#endif  // VTRAIN_COMMON_CONNECTION_H_
