#include "server/follower.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "google/protobuf/util/time_util.h"
#include "grpcpp/grpcpp.h"
#include "server/log.h"

namespace vtrain::server {

using google::protobuf::util::TimeUtil;

Follower::Follower(Options options, Registry& registry, Metrics& metrics)
    : options_(std::move(options)), registry_(registry), metrics_(metrics) {}

void Follower::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void Follower::Stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

std::unique_ptr<grpc::ClientContext> Follower::Context(absl::Duration timeout) const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  if (timeout != absl::InfiniteDuration())
    ctx->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  if (!options_.token.empty()) ctx->AddMetadata("authorization", "Bearer " + options_.token);
  return ctx;
}

void Follower::Take(const v1::ProfileSet& set, SetOrigin origin) {
  if (registry_.Contains(set.id())) return;
  absl::StatusOr<v1::PushProfileSetResponse> r =
      registry_.Accept(set, {.origin = origin, .created_at = CreatedAt::kKeepGiven});
  if (r.ok()) {
    Log(absl::StrCat("synced ", set.id(), " from the registry"));
  } else {
    metrics_.SyncSkipped();
    Log(absl::StrCat("skipping registry set ", set.id(), ": ", r.status().message()));
  }
}

absl::StatusOr<int64_t> Follower::Reconcile(v1::ProfileRegistry::Stub& stub) {
  v1::ListProfileSetsResponse list;
  grpc::Status s = stub.ListProfileSets(Context(absl::Seconds(10)).get(), {}, &list);
  if (!s.ok()) return absl::UnavailableError(s.error_message());
  int64_t newest_ns = INT64_MIN;
  absl::flat_hash_set<std::string> listed;
  for (const v1::ProfileSetSummary& summary : list.profile_sets()) {
    listed.insert(summary.id());
    newest_ns = std::max(newest_ns, TimeUtil::TimestampToNanoseconds(summary.created_at()));
    if (registry_.Contains(summary.id())) continue;
    v1::GetProfileSetRequest get;
    get.set_id(summary.id());
    v1::ProfileSet set;
    s = stub.GetProfileSet(Context(absl::Seconds(30)).get(), get, &set);
    if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED ||
        s.error_code() == grpc::StatusCode::NOT_FOUND) {
      // Too large for this predictor's limit, or deleted meanwhile: skip it
      // rather than retry it forever (and never see later sets).
      metrics_.SyncSkipped();
      Log(absl::StrCat("skipping registry set ", summary.id(), ": ", s.error_message()));
      continue;
    }
    if (!s.ok()) return absl::UnavailableError(s.error_message());
    Take(set, summary.builtin() ? SetOrigin::kBuiltin : SetOrigin::kMeasured);
  }
  // Deletions made while this predictor was away (or restarting).
  for (const std::string& id : registry_.Ids()) {
    if (listed.contains(id)) continue;
    if (registry_.Delete(id).ok()) Log(absl::StrCat("deleted ", id, ", as the registry did"));
  }
  return newest_ns;
}

absl::Status Follower::Follow(v1::ProfileRegistry::Stub& stub, int64_t since_ns) {
  // Sets created after the newest one listed: one the predictor skipped is
  // not streamed again.
  v1::WatchProfileSetsRequest request;
  if (since_ns != INT64_MIN) *request.mutable_since() = TimeUtil::NanosecondsToTimestamp(since_ns);
  std::unique_ptr<grpc::ClientContext> watch_ctx = Context(absl::InfiniteDuration());
  std::unique_ptr<grpc::ClientReader<v1::ProfileSetEvent>> reader =
      stub.WatchProfileSets(watch_ctx.get(), request);
  std::atomic<bool> done{false};
  // Stop must not wait for the registry's next message.
  std::thread canceller([&] {
    while (!stopping_ && !done) absl::SleepFor(absl::Milliseconds(50));
    if (stopping_) watch_ctx->TryCancel();
  });
  v1::ProfileSetEvent event;
  while (reader->Read(&event)) {
    if (event.has_added()) Take(event.added(), SetOrigin::kMeasured);
    if (!event.deleted_id().empty() && registry_.Delete(event.deleted_id()).ok()) {
      Log(absl::StrCat("deleted ", event.deleted_id(), ", as the registry did"));
    }
    metrics_.RegistrySyncLag(0);
  }
  done = true;
  canceller.join();
  grpc::Status end = reader->Finish();
  if (end.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) metrics_.SyncSkipped();
  return absl::UnavailableError(end.error_message());
}

absl::Status Follower::SyncOnce(v1::ProfileRegistry::Stub& stub) {
  absl::StatusOr<int64_t> newest_ns = Reconcile(stub);
  if (!newest_ns.ok()) return newest_ns.status();
  reached_ = true;
  metrics_.RegistryUp(true);
  if (options_.link != nullptr) options_.link->Up();
  metrics_.RegistrySyncLag(0);
  return Follow(stub, *newest_ns);
}

void Follower::Loop() {
  // The same message limit as the registry, so every set it accepts fits.
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(static_cast<int>(options_.max_message_bytes));
  auto channel = grpc::CreateCustomChannel(options_.address, options_.credentials, args);
  auto stub = v1::ProfileRegistry::NewStub(channel);
  absl::Duration backoff = absl::Milliseconds(200);
  absl::Time last_contact = absl::Now();
  std::mt19937_64 engine(std::random_device{}());
  std::uniform_real_distribution<double> jitter(0, 1);
  while (!stopping_) {
    absl::Status s = SyncOnce(*stub);
    if (stopping_) break;
    // In contact until the stream broke just now (SyncOnce never returns OK):
    // the lag counts from here, and the backoff starts over.
    if (reached_.exchange(false)) {
      last_contact = absl::Now();
      backoff = absl::Milliseconds(200);
    }
    metrics_.RegistryUp(false);
    if (options_.link != nullptr) options_.link->Down();
    metrics_.RegistrySyncLag(absl::ToDoubleSeconds(absl::Now() - last_contact));
    Log(absl::StrCat("registry ", options_.address, " unreachable (", s.message(),
                     "); serving from the local cache of ", registry_.size(), " sets"));
    // Half the backoff plus a random part of the other half: predictors
    // that lost the registry together do not retry in step when it returns.
    const absl::Duration wait = backoff * (0.5 + 0.5 * jitter(engine));
    for (absl::Time until = absl::Now() + wait; absl::Now() < until && !stopping_;) {
      absl::SleepFor(absl::Milliseconds(50));
    }
    backoff = std::min(backoff * 2, absl::Seconds(5));
  }
}

}  // namespace vtrain::server
