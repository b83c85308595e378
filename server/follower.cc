#include "server/follower.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "server/log.h"

namespace vtrain::server {

Follower::Follower(std::string address, std::shared_ptr<grpc::ChannelCredentials> credentials,
                   Registry& registry, Metrics& metrics)
    : address_(std::move(address)),
      credentials_(std::move(credentials)),
      registry_(registry),
      metrics_(metrics) {}

void Follower::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void Follower::Stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

absl::Status Follower::SyncOnce(v1::ProfileRegistry::Stub& stub) {
  // Fill the cache with every set the registry has that we lack.
  grpc::ClientContext list_ctx;
  list_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ListProfileSetsResponse list;
  grpc::Status s = stub.ListProfileSets(&list_ctx, v1::ListProfileSetsRequest(), &list);
  if (!s.ok()) return absl::UnavailableError(s.error_message());
  for (const v1::ProfileSetSummary& summary : list.profile_sets()) {
    if (registry_.Contains(summary.id())) continue;
    grpc::ClientContext get_ctx;
    get_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::GetProfileSetRequest get;
    get.set_id(summary.id());
    v1::ProfileSet set;
    s = stub.GetProfileSet(&get_ctx, get, &set);
    if (!s.ok()) return absl::UnavailableError(s.error_message());
    absl::StatusOr<v1::PushProfileSetResponse> r = registry_.Accept(
        set, {.origin = summary.builtin() ? SetOrigin::kBuiltin : SetOrigin::kMeasured,
              .created_at = CreatedAt::kKeepGiven});
    if (!r.ok())
      Log(absl::StrCat("ignoring registry set ", summary.id(), ": ", r.status().message()));
  }
  metrics_.RegistryUp(true);
  metrics_.RegistrySyncLag(0);
  // Then follow new sets as they arrive.
  grpc::ClientContext watch_ctx;
  std::unique_ptr<grpc::ClientReader<v1::ProfileSet>> reader =
      stub.WatchProfileSets(&watch_ctx, v1::WatchProfileSetsRequest());
  v1::ProfileSet set;
  std::atomic<bool> done{false};
  // Stop must not wait for the registry's next message.
  std::thread canceller([&] {
    while (!stopping_ && !done) absl::SleepFor(absl::Milliseconds(50));
    if (stopping_) watch_ctx.TryCancel();
  });
  while (reader->Read(&set)) {
    if (!registry_.Contains(set.id())) {
      absl::StatusOr<v1::PushProfileSetResponse> r = registry_.Accept(
          set, {.origin = SetOrigin::kMeasured, .created_at = CreatedAt::kKeepGiven});
      if (r.ok()) Log(absl::StrCat("synced ", set.id(), " from the registry"));
    }
    metrics_.RegistrySyncLag(0);
  }
  done = true;
  canceller.join();
  grpc::Status end = reader->Finish();
  return absl::UnavailableError(end.error_message());
}

void Follower::Loop() {
  auto channel = grpc::CreateChannel(address_, credentials_);
  auto stub = v1::ProfileRegistry::NewStub(channel);
  absl::Duration backoff = absl::Milliseconds(200);
  absl::Time last_contact = absl::Now();
  while (!stopping_) {
    absl::Status s = SyncOnce(*stub);
    if (stopping_) break;
    metrics_.RegistryUp(false);
    metrics_.RegistrySyncLag(absl::ToDoubleSeconds(absl::Now() - last_contact));
    Log(absl::StrCat("registry ", address_, " unreachable (", s.message(),
                     "); serving from the local cache of ", registry_.size(), " sets"));
    for (absl::Time until = absl::Now() + backoff; absl::Now() < until && !stopping_;) {
      absl::SleepFor(absl::Milliseconds(50));
    }
    backoff = std::min(backoff * 2, absl::Seconds(5));
    last_contact = s.ok() ? absl::Now() : last_contact;
  }
}

}  // namespace vtrain::server
