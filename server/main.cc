// vtrain-server: parses flags and runs a Server until SIGTERM or SIGINT.
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/credentials.h"
#include "server/flags.h"
#include "server/server.h"

int main(int argc, char** argv) {
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
