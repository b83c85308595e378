#include "server/flags.h"

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/flag_parser.h"
#include "core/util/status_macros.h"

namespace vtrain::server {
namespace {

constexpr char kAbout[] =
    "vtrain-server: the vtrain gRPC service (Simulator, ProfileRegistry, health, reflection).\n"
    "example: vtrain-server --listen 0.0.0.0:50051 --db /var/lib/vtrain/vtrain.db "
    "--push-token-file /etc/vtrain/token --metrics-listen 0.0.0.0:9090\n\n"
    "flags (--name=value or --name value; a switch alone means true):\n";

std::string Quoted(const std::string& s) { return absl::StrCat("\"", s, "\""); }

// The flags, their help ending in the default taken from `defaults`.
common::FlagParser Declare(const CommandLine& defaults) {
  const ServerOptions& o = defaults.options;
  common::FlagParser f("vtrain-server");
  auto value = [&f](const char* name, const char* value_name, const char* help,
                    const std::string& dflt) {
    f.AddValue(name, value_name, absl::StrCat(help, " (default: ", dflt, ")"));
  };
  value("listen", "HOST:PORT", "gRPC address (port 0: any free)", Quoted(o.listen));
  value("metrics-listen", "HOST:PORT", "Prometheus /metrics address (empty: off)",
        Quoted(o.metrics_listen));
  value("db", "FILE", "SQLite database file (created if absent)", Quoted(o.db_path));
  value("role", "ROLE", "all | registry | predictor", "all");
  value("registry", "HOST:PORT", "predictor: the registry's address", Quoted(o.registry));
  value("push-token-file", "FILE", "file holding the bearer token for push and delete",
        Quoted(defaults.push_token_file));
  f.AddSwitch("require-auth-for-reads", "reads need the token too (default: false)");
  value("tls-cert-file", "FILE", "PEM certificate chain: serve TLS", Quoted(o.tls_cert_file));
  value("tls-key-file", "FILE", "PEM private key for --tls-cert-file", Quoted(o.tls_key_file));
  value("tls-client-ca-file", "FILE", "PEM CA: require client certificates (mTLS)",
        Quoted(o.tls_client_ca_file));
  value("registry-ca-file", "FILE", "predictor: PEM CA for TLS to the registry",
        Quoted(o.registry_ca_file));
  value("max-message-bytes", "N", "largest gRPC message accepted",
        absl::StrCat(o.max_message_bytes));
  value("max-tasks", "N", "largest simulation per request (tasks)", absl::StrCat(o.max_tasks));
  value("max-request-memory-bytes", "N",
        "most memory one prediction's graph may take; times --max-concurrent-simulations, "
        "keep it under the container's limit",
        absl::StrCat(o.max_request_memory_bytes));
  value("max-concurrent-simulations", "N", "simulations at once (0: hardware threads)",
        absl::StrCat(o.max_concurrent_simulations));
  value("prediction-cache-entries", "N",
        "Predict answers kept for repeated identical requests (0: off)",
        absl::StrCat(o.prediction_cache_entries));
  value("reserved-slots", "N",
        "simulation slots one client can never take, kept for the others (-1: a quarter, at "
        "least one)",
        absl::StrCat(o.reserved_slots));
  value("max-queued-per-client", "N",
        "calls one client may have waiting for a slot; more get RESOURCE_EXHAUSTED with a retry "
        "hint (0: sixteen per slot, at least 64)",
        absl::StrCat(o.max_queued_per_client));
  value("ready-without-registry-seconds", "N",
        "predictor: NOT_SERVING until its first sync with the registry or this long without "
        "one (0: SERVING at once)",
        absl::StrCat(o.ready_without_registry_seconds));
  value("grace-seconds", "N", "on SIGTERM, how long in-flight calls may finish",
        absl::StrCat(defaults.grace_seconds));
  f.AddValue("check-db", "FILE",
             "check a database (integrity, schema version, profile sets), read-only, and exit: "
             "0 sound, 1 damaged or newer than this server, 2 not found");
  f.AddSwitch("help", "this list");
  return f;
}

// Sets `*out` from the integer flag `name` when it is given.
template <typename Int>
absl::Status SetInt(const common::FlagParser& f, const char* name, Int* out) {
  VTRAIN_ASSIGN_OR_RETURN(std::optional<int64_t> v, f.GetInt(name));
  if (v) *out = static_cast<Int>(*v);
  return absl::OkStatus();
}

absl::Status CheckRanges(const CommandLine& c) {
  const ServerOptions& o = c.options;
  if (o.max_message_bytes <= 0 || o.max_message_bytes > (int64_t{1} << 30) || o.max_tasks <= 0 ||
      o.max_concurrent_simulations < 0 || o.max_concurrent_simulations > 4096 ||
      c.grace_seconds < 0 || c.grace_seconds > 3600 || o.max_request_memory_bytes < (1 << 20)) {
    return absl::InvalidArgumentError(
        "--max-message-bytes must be in [1, 2^30], --max-tasks positive, "
        "--max-concurrent-simulations in [0, 4096], --grace-seconds in [0, 3600] and "
        "--max-request-memory-bytes at least 1048576");
  }
  if (o.ready_without_registry_seconds < 0 || o.ready_without_registry_seconds > 3600) {
    return absl::InvalidArgumentError(
        absl::StrCat("--ready-without-registry-seconds=", o.ready_without_registry_seconds,
                     " must be in [0, 3600] (0: ready at once)"));
  }
  if (o.prediction_cache_entries < 0 || o.prediction_cache_entries > 1'000'000) {
    return absl::InvalidArgumentError(
        absl::StrCat("--prediction-cache-entries=", o.prediction_cache_entries,
                     " must be in [0, 1000000] (0 turns the cache off)"));
  }
  if (o.reserved_slots < -1 || o.reserved_slots > 4096 || o.max_queued_per_client < 0 ||
      o.max_queued_per_client > 1'000'000) {
    return absl::InvalidArgumentError(absl::StrCat("--reserved-slots=", o.reserved_slots,
                                                   " must be in [-1, 4096] (-1: a quarter) and "
                                                   "--max-queued-per-client=",
                                                   o.max_queued_per_client,
                                                   " in [0, 1000000] (0: automatic)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args) {
  CommandLine c;
  common::FlagParser f = Declare(c);
  VTRAIN_RETURN_IF_ERROR(f.Parse(args));
  ServerOptions& o = c.options;
  auto text = [&f](const char* name, std::string* out) {
    if (auto v = f.Get(name)) *out = *v;
  };
  text("listen", &o.listen);
  text("metrics-listen", &o.metrics_listen);
  text("db", &o.db_path);
  text("registry", &o.registry);
  text("push-token-file", &c.push_token_file);
  text("tls-cert-file", &o.tls_cert_file);
  text("tls-key-file", &o.tls_key_file);
  text("tls-client-ca-file", &o.tls_client_ca_file);
  text("registry-ca-file", &o.registry_ca_file);
  if (auto role = f.Get("role")) {
    VTRAIN_ASSIGN_OR_RETURN(o.role, ParseRole(*role));
  }
  o.require_auth_for_reads = f.Switch("require-auth-for-reads");
  VTRAIN_RETURN_IF_ERROR(SetInt(f, "max-message-bytes", &o.max_message_bytes));
  VTRAIN_RETURN_IF_ERROR(SetInt(f, "max-tasks", &o.max_tasks));
  VTRAIN_RETURN_IF_ERROR(SetInt(f, "max-request-memory-bytes", &o.max_request_memory_bytes));
  VTRAIN_RETURN_IF_ERROR(SetInt(f, "max-concurrent-simulations", &o.max_concurrent_simulations));
  VTRAIN_RETURN_IF_ERROR(SetInt(f, "prediction-cache-entries", &o.prediction_cache_entries));
  VTRAIN_RETURN_IF_ERROR(SetInt(f, "reserved-slots", &o.reserved_slots));
  VTRAIN_RETURN_IF_ERROR(SetInt(f, "max-queued-per-client", &o.max_queued_per_client));
  VTRAIN_RETURN_IF_ERROR(
      SetInt(f, "ready-without-registry-seconds", &o.ready_without_registry_seconds));
  VTRAIN_RETURN_IF_ERROR(SetInt(f, "grace-seconds", &c.grace_seconds));
  c.help = f.Switch("help");
  text("check-db", &c.check_db);
  VTRAIN_RETURN_IF_ERROR(CheckRanges(c));
  VTRAIN_RETURN_IF_ERROR(ValidateListenAddress(o.listen, "--listen"));
  if (!o.metrics_listen.empty()) {
    VTRAIN_RETURN_IF_ERROR(ValidateListenAddress(o.metrics_listen, "--metrics-listen"));
  }
  return c;
}

std::string Usage() { return absl::StrCat(kAbout, Declare(CommandLine{}).Usage()); }

}  // namespace vtrain::server
