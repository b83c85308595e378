// A gRPC server interceptor that counts every call the server answers by
// method and status code — health checks, reflection, and calls refused
// before any handler ran (an oversized message: RESOURCE_EXHAUSTED) included,
// which the services' own metrics never see.
#ifndef VTRAIN_SERVER_CALL_COUNTER_H_
#define VTRAIN_SERVER_CALL_COUNTER_H_

#include <memory>

#include "grpcpp/support/server_interceptor.h"
#include "server/metrics.h"

namespace vtrain::server {

// Install with ServerBuilder::experimental().SetInterceptorCreators. `metrics`
// must outlive the server.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeCallCounter(
    Metrics& metrics);

}  // namespace vtrain::server

#endif  // VTRAIN_SERVER_CALL_COUNTER_H_
