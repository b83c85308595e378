// A predictor's follower: makes the local Registry hold exactly the sets its
// registry holds (copies what it lacks, deletes what the registry no longer
// has), then follows the registry's WatchProfileSets events (arrivals and
// deletions), reconnecting with backoff (doubling from 200 ms to 5 s, each
// wait jittered between half and all of it) and serving from the local cache
// meanwhile. A set it cannot take (over the message limit, invalid) is
// skipped and counted, never retried forever.
#ifndef VTRAIN_SERVER_FOLLOWER_H_
#define VTRAIN_SERVER_FOLLOWER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/security/credentials.h"
#include "server/metrics.h"
#include "server/registry.h"
#include "server/registry_link.h"
#include "vtrain/v1/vtrain.grpc.pb.h"

namespace vtrain::server {

class Follower {
 public:
  struct Options {
    std::string address;  // the registry, "HOST:PORT"
    std::shared_ptr<grpc::ChannelCredentials> credentials;
    std::string token;  // bearer token for a registry that guards reads; empty: none
    int64_t max_message_bytes = 64 << 20;  // the largest set it takes, as the registry's limit
    RegistryLink* link = nullptr;          // told of every contact and loss; may be null
  };
  // Follows the registry into `registry`. `registry` and `metrics` must
  // outlive the follower.
  Follower(Options options, Registry& registry, Metrics& metrics);
  Follower(const Follower&) = delete;
  Follower& operator=(const Follower&) = delete;
  ~Follower() { Stop(); }

  // Starts following on a thread of its own. Call once.
  void Start();
  // Cancels the stream and the backoff and joins the thread (within about
  // 50 ms unless a sync call is in flight). Idempotent.
  void Stop();

 private:
  void Loop();
  // One connection: fetches the sets it lacks, then reads the watch stream
  // until it breaks. Always returns an error (UNAVAILABLE) saying why it
  // ended.
  absl::Status SyncOnce(v1::ProfileRegistry::Stub& stub);
  // Copies what the local registry lacks and deletes what the registry's
  // list does not hold; returns the newest creation time listed (ns).
  absl::StatusOr<int64_t> Reconcile(v1::ProfileRegistry::Stub& stub);
  // Follows the watch stream from `since_ns` until it breaks.
  absl::Status Follow(v1::ProfileRegistry::Stub& stub, int64_t since_ns);
  void Take(const v1::ProfileSet& set, SetOrigin origin);
  std::unique_ptr<grpc::ClientContext> Context(absl::Duration timeout) const;

  const Options options_;
  Registry& registry_;
  Metrics& metrics_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> reached_{false};  // the last SyncOnce got through to the registry
  std::thread thread_;
};

}  // namespace vtrain::server

#endif  // VTRAIN_SERVER_FOLLOWER_H_
