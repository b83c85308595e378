// vtrain-server: parses flags and runs a Server until SIGTERM or SIGINT.
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/credentials.h"
#include "server/allocator.h"
#include "server/flags.h"
#include "server/profile_store.h"
#include "server/server.h"

namespace {

// --check-db FILE: what the file holds, or why it cannot be served; 0 when it
// is sound, 1 when it is damaged or newer than this server, 2 when missing.
int CheckDatabase(const std::string& path) {
  absl::StatusOr<vtrain::server::ProfileStore::Check> check =
      vtrain::server::ProfileStore::CheckDatabase(path);
  if (!check.ok()) {
    std::fprintf(stderr, "vtrain-server: %s\n", std::string(check.status().message()).c_str());
    return check.status().code() == absl::StatusCode::kNotFound ? 2 : 1;
  }
  std::printf("database '%s': integrity ok, schema version %lld, %lld profile sets\n", path.c_str(),
              static_cast<long long>(check->schema_version),
              static_cast<long long>(check->profile_sets));
  for (const auto& [gpu, sets] : check->sets_by_gpu) {
    std::printf("  %-20s %lld\n", gpu.c_str(), static_cast<long long>(sets));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Before any thread: warm arenas and kept pages for every call
  // (server/allocator.h).
  vtrain::server::TuneAllocatorForServing();
  // The system's Abseil is built with its debug checks: every absl::Mutex
  // lock (gRPC's own included) then records lock order in a global graph to
  // detect deadlocks, a visible share of each call's CPU under load (perf:
  // GraphCycles). The server binary turns it off; tests keep it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::StatusOr<vtrain::server::CommandLine> command_line =
      vtrain::server::ParseCommandLine(std::vector<std::string>(argv + 1, argv + argc));
  if (!command_line.ok()) {
    std::fprintf(stderr, "vtrain-server: %s\n",
                 std::string(command_line.status().message()).c_str());
    return 2;
  }
  if (command_line->help) {
    std::printf("%s", vtrain::server::Usage().c_str());
    return 0;
  }
  if (!command_line->check_db.empty()) return CheckDatabase(command_line->check_db);
  vtrain::server::ServerOptions& options = command_line->options;
  if (!command_line->push_token_file.empty()) {
    absl::StatusOr<std::string> token =
        vtrain::common::ReadTokenFile("--push-token-file", command_line->push_token_file);
    if (!token.ok()) {
      std::fprintf(stderr, "vtrain-server: %s\n", std::string(token.status().message()).c_str());
      return 2;
    }
    options.push_token = *std::move(token);
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
  (*server)->Shutdown(absl::Seconds(command_line->grace_seconds));
  return 0;
}
