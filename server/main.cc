// vtrain-server: parses flags and runs a Server until SIGTERM or SIGINT.
#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#include <algorithm>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "server/server.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50051", "gRPC address HOST:PORT (port 0: any free)");
ABSL_FLAG(std::string, metrics_listen, "", "Prometheus /metrics address HOST:PORT (empty: off)");
ABSL_FLAG(std::string, db, "vtrain.db", "SQLite database file (created if absent)");
ABSL_FLAG(std::string, role, "all", "all | registry | predictor");
ABSL_FLAG(std::string, registry, "", "predictor: the registry's HOST:PORT");
ABSL_FLAG(std::string, push_token_file, "", "file holding the bearer token for push and delete");
ABSL_FLAG(bool, require_auth_for_reads, false, "reads need the token too");
ABSL_FLAG(std::string, tls_cert_file, "", "PEM certificate chain: serve TLS");
ABSL_FLAG(std::string, tls_key_file, "", "PEM private key for --tls-cert-file");
ABSL_FLAG(std::string, tls_client_ca_file, "", "PEM CA: require client certificates (mTLS)");
ABSL_FLAG(std::string, registry_ca_file, "", "predictor: PEM CA for TLS to the registry");
ABSL_FLAG(int64_t, max_message_bytes, 64 << 20, "largest gRPC message accepted");
ABSL_FLAG(int64_t, max_tasks, 50'000'000, "largest simulation per request (tasks)");
ABSL_FLAG(int, max_concurrent_simulations, 0, "simulations at once (0: hardware threads)");
ABSL_FLAG(int, grace_seconds, 10, "on SIGTERM, how long in-flight calls may finish");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "vtrain-server: the vtrain gRPC service (Simulator, ProfileRegistry, health, reflection).\n"
      "example: vtrain-server --listen 0.0.0.0:50051 --db /var/lib/vtrain/vtrain.db "
      "--push-token-file /etc/vtrain/token --metrics-listen 0.0.0.0:9090");
  // Accept --push-token-file as well as absl's --push_token_file.
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size(); ++i) {
    std::string& a = args[i];
    if (a.rfind("--", 0) != 0) continue;
    const size_t end = std::min(a.find('='), a.size());
    std::replace(a.begin() + 2, a.begin() + static_cast<std::ptrdiff_t>(end), '-', '_');
  }
  std::vector<char*> argv_fixed;
  for (std::string& a : args) argv_fixed.push_back(a.data());
  absl::ParseCommandLine(static_cast<int>(argv_fixed.size()), argv_fixed.data());
  vtrain::server::ServerOptions options;
  options.listen = absl::GetFlag(FLAGS_listen);
  options.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  options.db_path = absl::GetFlag(FLAGS_db);
  absl::StatusOr<vtrain::server::Role> role = vtrain::server::ParseRole(absl::GetFlag(FLAGS_role));
  if (!role.ok()) {
    std::fprintf(stderr, "vtrain-server: %s\n", std::string(role.status().message()).c_str());
    return 2;
  }
  options.role = *role;
  options.registry = absl::GetFlag(FLAGS_registry);
  if (const std::string path = absl::GetFlag(FLAGS_push_token_file); !path.empty()) {
    std::ifstream in(path);
    if (!in) {
      std::fprintf(stderr, "vtrain-server: cannot read --push-token-file=%s\n", path.c_str());
      return 2;
    }
    std::stringstream s;
    s << in.rdbuf();
    options.push_token = std::string(absl::StripAsciiWhitespace(s.str()));
    if (options.push_token.empty()) {
      std::fprintf(stderr, "vtrain-server: --push-token-file=%s is empty\n", path.c_str());
      return 2;
    }
  }
  options.require_auth_for_reads = absl::GetFlag(FLAGS_require_auth_for_reads);
  options.tls_cert_file = absl::GetFlag(FLAGS_tls_cert_file);
  options.tls_key_file = absl::GetFlag(FLAGS_tls_key_file);
  options.tls_client_ca_file = absl::GetFlag(FLAGS_tls_client_ca_file);
  options.registry_ca_file = absl::GetFlag(FLAGS_registry_ca_file);
  options.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  options.max_tasks = absl::GetFlag(FLAGS_max_tasks);
  options.max_concurrent_simulations = absl::GetFlag(FLAGS_max_concurrent_simulations);
  if (options.max_message_bytes <= 0 || options.max_message_bytes > (int64_t{1} << 30) ||
      options.max_tasks <= 0 || options.max_concurrent_simulations < 0) {
    std::fprintf(stderr, "vtrain-server: --max-message-bytes, --max-tasks must be positive and "
                         "--max-concurrent-simulations non-negative\n");
    return 2;
  }

  // gRPC servers ignore SIGTERM unless handled: wait for it on this thread.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  absl::StatusOr<std::unique_ptr<vtrain::server::Server>> server =
      vtrain::server::Server::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "vtrain-server: %s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  std::printf("vtrain-server listening on port %d\n", (*server)->port());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  (*server)->Shutdown(absl::Seconds(absl::GetFlag(FLAGS_grace_seconds)));
  return 0;
}
