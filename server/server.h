// vtrain-server: the Simulator and ProfileRegistry gRPC services over the
// core, a SQLite profile store, health, reflection and Prometheus metrics.
#ifndef VTRAIN_SERVER_SERVER_H_
#define VTRAIN_SERVER_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/options.h"

namespace vtrain::server {

class Server {
 public:
  // Opens the store (seeding an empty one with the built-in profile sets),
  // loads it, starts listening. A predictor also syncs from its registry.
  static absl::StatusOr<std::unique_ptr<Server>> Start(const ServerOptions& options);
  ~Server();

  int port() const;
  // Stops accepting, lets in-flight calls finish within `grace`, flushes and
  // closes the store.
  void Shutdown(absl::Duration grace);
  // Blocks until Shutdown.
  void Wait();

  class Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace vtrain::server

#endif  // VTRAIN_SERVER_SERVER_H_
