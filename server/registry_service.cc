#include "server/registry_service.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"
#include "google/protobuf/util/time_util.h"
#include "server/log.h"

namespace vtrain::server {
namespace {

using google::protobuf::util::TimeUtil;

// Writes go to the registry; a predictor only mirrors it.
absl::Status RefusedByPredictor(const ServerOptions& options, const std::string& fix) {
  if (options.role != Role::kPredictor) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat("this is a predictor; ", fix));
}

}  // namespace

RegistryService::RegistryService(const ServerOptions& options, Registry& registry,
                                 const MethodRunner& runner)
    : push_{"PushProfileSet", Access::kWrite,
            RefusedByPredictor(options,
                               absl::StrCat("push to the registry at ", options.registry))},
      list_{"ListProfileSets", Access::kRead, absl::OkStatus()},
      get_{"GetProfileSet", Access::kRead, absl::OkStatus()},
      delete_{"DeleteProfileSet", Access::kWrite,
              RefusedByPredictor(options, "delete on the registry")},
      watch_{"WatchProfileSets", Access::kRead, absl::OkStatus()},
      next_work_{"NextProfilingWork", Access::kRead, absl::OkStatus()},
      registry_(registry),
      runner_(runner) {}

grpc::Status RegistryService::PushProfileSet(grpc::ServerContext* ctx,
                                             const v1::PushProfileSetRequest* req,
                                             v1::PushProfileSetResponse* resp) {
  return runner_.Run(*ctx, push_, *req, [&] { return RunPush(req, resp); });
}

grpc::Status RegistryService::ListProfileSets(grpc::ServerContext* ctx,
                                              const v1::ListProfileSetsRequest* req,
                                              v1::ListProfileSetsResponse* resp) {
  return runner_.Run(*ctx, list_, *req, [&] {
    *resp = registry_.List(*req);
    return absl::OkStatus();
  });
}

grpc::Status RegistryService::GetProfileSet(grpc::ServerContext* ctx,
                                            const v1::GetProfileSetRequest* req,
                                            v1::ProfileSet* resp) {
  return runner_.Run(*ctx, get_, *req, [&]() -> absl::Status {
    VTRAIN_ASSIGN_OR_RETURN(*resp, registry_.Get(req->id()));
    return absl::OkStatus();
  });
}

grpc::Status RegistryService::DeleteProfileSet(grpc::ServerContext* ctx,
                                               const v1::DeleteProfileSetRequest* req,
                                               v1::DeleteProfileSetResponse* resp) {
  return runner_.Run(*ctx, delete_, *req, [&]() -> absl::Status {
    VTRAIN_RETURN_IF_ERROR(registry_.Delete(req->id()));
    resp->set_deleted(true);
    Log(absl::StrCat("deleted ", req->id(), " at the request of ", ctx->peer()));
    return absl::OkStatus();
  });
}

grpc::Status RegistryService::WatchProfileSets(grpc::ServerContext* ctx,
                                               const v1::WatchProfileSetsRequest* req,
                                               grpc::ServerWriter<v1::ProfileSetEvent>* writer) {
  return runner_.Run(*ctx, watch_, *req, [&] { return RunWatch(ctx, req, writer); });
}

grpc::Status RegistryService::NextProfilingWork(grpc::ServerContext* ctx,
                                                const v1::NextProfilingWorkRequest* req,
                                                v1::NextProfilingWorkResponse* resp) {
  return runner_.Run(*ctx, next_work_, *req, [&]() -> absl::Status {
    VTRAIN_ASSIGN_OR_RETURN(*resp, registry_.NextWork(*req));
    return absl::OkStatus();
  });
}

absl::Status RegistryService::RunPush(const v1::PushProfileSetRequest* req,
                                      v1::PushProfileSetResponse* resp) {
  if (!req->has_profile_set()) return absl::InvalidArgumentError("profile_set is required");
  VTRAIN_ASSIGN_OR_RETURN(
      *resp, registry_.Accept(req->profile_set(), {.origin = SetOrigin::kMeasured,
                                                   .created_at = CreatedAt::kStampNow}));
  Log(absl::StrCat(resp->already_present() ? "re-push of " : "accepted ", resp->id()));
  return absl::OkStatus();
}

absl::Status RegistryService::RunWatch(const grpc::ServerContext* ctx,
                                       const v1::WatchProfileSetsRequest* req,
                                       grpc::ServerWriter<v1::ProfileSetEvent>* writer) {
  WatchCursor cursor;
  if (req->has_since()) cursor.created_after_ns = TimeUtil::TimestampToNanoseconds(req->since());
  while (!ctx->IsCancelled() && !stopping_) {
    VTRAIN_ASSIGN_OR_RETURN(std::vector<v1::ProfileSetEvent> events,
                            registry_.WaitForChanges(cursor, absl::Milliseconds(200)));
    for (const v1::ProfileSetEvent& event : events) {
      // The client went away.
      if (!writer->Write(event)) return absl::CancelledError();
    }
  }
  return absl::OkStatus();
}

}  // namespace vtrain::server
