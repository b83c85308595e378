// A predictor's follower: copies every profile set its registry has into the
// local Registry, then follows the registry's WatchProfileSets stream,
// reconnecting with backoff and serving from the local cache meanwhile.
#ifndef VTRAIN_SERVER_FOLLOWER_H_
#define VTRAIN_SERVER_FOLLOWER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "grpcpp/security/credentials.h"
#include "server/metrics.h"
#include "server/registry.h"
#include "vtrain/v1/vtrain.grpc.pb.h"

namespace vtrain::server {

class Follower {
 public:
  // Follows the registry at `address` ("HOST:PORT") over `credentials` into
  // `registry`. `registry` and `metrics` must outlive the follower.
  Follower(std::string address, std::shared_ptr<grpc::ChannelCredentials> credentials,
           Registry& registry, Metrics& metrics);
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

  const std::string address_;
  const std::shared_ptr<grpc::ChannelCredentials> credentials_;
  Registry& registry_;
  Metrics& metrics_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace vtrain::server

#endif  // VTRAIN_SERVER_FOLLOWER_H_
