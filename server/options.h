// The options of vtrain-server that its services read (SimulatorService,
// RegistryService, the method runner), apart from the Server that starts
// them, so that a service includes what it reads and not the whole server.
#ifndef VTRAIN_SERVER_OPTIONS_H_
#define VTRAIN_SERVER_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace vtrain::server {

enum class Role { kAll, kRegistry, kPredictor };
absl::StatusOr<Role> ParseRole(const std::string& name);

// "HOST:PORT" (or ":PORT", "[::1]:PORT") with a port in [0, 65535] (0: any
// free port). INVALID_ARGUMENT naming `flag` otherwise: gRPC would silently
// bind a random port for an out-of-range one.
absl::Status ValidateListenAddress(const std::string& address, const std::string& flag);

struct ServerOptions {
  std::string listen = "127.0.0.1:50051";  // port 0 picks a free port
  std::string metrics_listen;              // empty: no /metrics
  std::string db_path = "vtrain.db";
  Role role = Role::kAll;
  std::string registry;    // predictor: the registry's address
  std::string push_token;  // bearer token for pushes and deletes; empty: refused
  bool require_auth_for_reads = false;
  std::string tls_cert_file, tls_key_file;  // both set: TLS
  std::string tls_client_ca_file;           // set: clients need certificates (mTLS)
  std::string registry_ca_file;             // predictor: TLS to the registry with this CA
  int64_t max_message_bytes = 64 << 20;
  int64_t max_tasks = 50'000'000;  // per prediction
  // The most memory one prediction's graph may take (kernel granularity
  // stores it); with max_concurrent_simulations it bounds the server's memory.
  int64_t max_request_memory_bytes = int64_t{512} << 20;
  int max_concurrent_simulations = 0;  // 0: hardware threads
  // Slots one client can never take (kept for the others; -1: a quarter, at
  // least one) and the calls one client may have queued (0: 16 per slot, at
  // least 64); server/admission.h.
  int reserved_slots = -1;
  int max_queued_per_client = 0;
  // Predict answers kept for identical requests (0: none; prediction_cache.h).
  int64_t prediction_cache_entries = 4096;
  // A predictor reports itself (Health "") NOT_SERVING until it has synced
  // with its registry once, or until this many seconds have passed without
  // it (then it serves its own cache, saying so): a new predictor in a
  // rolling update takes traffic only once it holds the registry's sets.
  // 0: SERVING at once.
  int64_t ready_without_registry_seconds = 10;
};

}  // namespace vtrain::server

#endif  // VTRAIN_SERVER_OPTIONS_H_
