// The one place where vtrain's absl::Status becomes a grpc::Status: RPC
// handlers work in absl::Status and convert once, on the way out.
#ifndef VTRAIN_SERVER_STATUS_H_
#define VTRAIN_SERVER_STATUS_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace vtrain::server {

// The same code (absl's codes equal gRPC's) and message.
grpc::Status ToGrpcStatus(const absl::Status& status);

// "OK", "NOT_FOUND", ...: the gRPC name of `code`, as the metrics label it.
const char* StatusCodeName(grpc::StatusCode code);

}  // namespace vtrain::server

#endif  // VTRAIN_SERVER_STATUS_H_
