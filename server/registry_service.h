// The ProfileRegistry gRPC service: pushes, listing, reads, deletes, the
// WatchProfileSets stream and the profiling-work queue, translated onto a
// Registry.
#ifndef VTRAIN_SERVER_REGISTRY_SERVICE_H_
#define VTRAIN_SERVER_REGISTRY_SERVICE_H_

#include <atomic>

#include "absl/status/status.h"
#include "grpcpp/grpcpp.h"
#include "server/method_runner.h"
#include "server/options.h"
#include "server/registry.h"
#include "vtrain/v1/vtrain.grpc.pb.h"

namespace vtrain::server {

// Thread-safe. Every reference must outlive the service.
class RegistryService final : public v1::ProfileRegistry::Service {
 public:
  RegistryService(const ServerOptions& options, Registry& registry, const MethodRunner& runner);

  // Ends every WatchProfileSets stream within about 200 ms (their calls then
  // return OK), so that a server shutdown need not wait out its grace period.
  void StopWatches() { stopping_ = true; }

  grpc::Status PushProfileSet(grpc::ServerContext* ctx, const v1::PushProfileSetRequest* req,
                              v1::PushProfileSetResponse* resp) override;
  grpc::Status ListProfileSets(grpc::ServerContext* ctx, const v1::ListProfileSetsRequest* req,
                               v1::ListProfileSetsResponse* resp) override;
  grpc::Status GetProfileSet(grpc::ServerContext* ctx, const v1::GetProfileSetRequest* req,
                             v1::ProfileSet* resp) override;
  grpc::Status DeleteProfileSet(grpc::ServerContext* ctx, const v1::DeleteProfileSetRequest* req,
                                v1::DeleteProfileSetResponse* resp) override;
  grpc::Status WatchProfileSets(grpc::ServerContext* ctx, const v1::WatchProfileSetsRequest* req,
                                grpc::ServerWriter<v1::ProfileSetEvent>* writer) override;
  grpc::Status NextProfilingWork(grpc::ServerContext* ctx, const v1::NextProfilingWorkRequest* req,
                                 v1::NextProfilingWorkResponse* resp) override;

 private:
  absl::Status RunPush(const v1::PushProfileSetRequest* req, v1::PushProfileSetResponse* resp);
  absl::Status RunWatch(const grpc::ServerContext* ctx, const v1::WatchProfileSetsRequest* req,
                        grpc::ServerWriter<v1::ProfileSetEvent>* writer);

  const Method push_, list_, get_, delete_, watch_, next_work_;
  Registry& registry_;
  const MethodRunner& runner_;
  std::atomic<bool> stopping_{false};
};

}  // namespace vtrain::server

#endif  // VTRAIN_SERVER_REGISTRY_SERVICE_H_
