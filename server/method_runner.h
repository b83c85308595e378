// What every vtrain-server RPC handler does around its body, in one place:
// time the call, check the server's role and the bearer token, convert the
// body's absl::Status once and record the call in the metrics.
#ifndef VTRAIN_SERVER_METHOD_RUNNER_H_
#define VTRAIN_SERVER_METHOD_RUNNER_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "google/protobuf/message.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"
#include "server/metrics.h"

namespace vtrain::server {

// kRead methods need the push token only when the server requires it for
// reads; kWrite methods always do.
enum class Access { kRead, kWrite };

// One RPC method as its handler declares it.
struct Method {
  const char* name;  // the metrics label: "Predict", "PushProfileSet", ...
  Access access;
  // Non-OK when this server's role does not serve the method: returned as is.
  absl::Status role_refusal;
};

// Who may call: copied from ServerOptions.
struct AccessPolicy {
  std::string push_token;  // empty: every call needing the token is refused
  bool require_auth_for_reads = false;
  // Requests larger than this are refused with RESOURCE_EXHAUSTED by the
  // runner (so they are counted); gRPC itself is set to refuse only twice
  // the size.
  int64_t max_message_bytes = 64 << 20;
};

class MethodRunner {
 public:
  // `metrics` must outlive the runner. Thread-safe.
  MethodRunner(AccessPolicy policy, Metrics& metrics)
      : policy_(std::move(policy)), metrics_(metrics) {}

  // Admits the call, runs `body` (a callable returning absl::Status) when
  // admitted, records method, code and latency, and returns the status as
  // gRPC's. A write is authenticated before its role is checked, so an
  // unauthenticated caller learns nothing about the server; a read its role
  // does not serve is refused before authentication (the refusal reveals
  // nothing either).
  template <typename Body>
  grpc::Status Run(grpc::ServerContextBase& context, const Method& method,
                   const google::protobuf::Message& request, Body&& body) const {
    const absl::Time start = absl::Now();
    absl::Status status = Admit(context, method, request);
    if (status.ok()) status = std::forward<Body>(body)();
    return Finish(context, method, start, status);
  }

  // Run's two halves, for a callback handler whose body may end on another
  // thread: Admit at the start (with `start` = absl::Now() taken before it),
  // then Finish with the body's status (or Admit's refusal) once it is known.
  absl::Status Admit(const grpc::ServerContextBase& context, const Method& method,
                     const google::protobuf::Message& request) const;
  // A refusal with a retry hint (kRetryPushbackPayload) puts it in the
  // call's trailers as grpc-retry-pushback-ms.
  grpc::Status Finish(grpc::ServerContextBase& context, const Method& method, absl::Time start,
                      const absl::Status& status) const;

 private:
  // The bearer token check; a refusal is logged with the method and peer.
  absl::Status CheckToken(const grpc::ServerContextBase& context, const Method& method) const;

  const AccessPolicy policy_;
  Metrics& metrics_;
};

}  // namespace vtrain::server

#endif  // VTRAIN_SERVER_METHOD_RUNNER_H_
