// vtrain-agent: hands argv to the command dispatcher; SIGTERM and SIGINT ask
// `serve` to stop after its current run.
#include <atomic>
#include <csignal>
#include <iostream>
#include <string>
#include <vector>

#include "profiler_agent/agent_commands.h"

namespace {

// The one piece of process state a signal handler may touch; it lives in the
// binary, not in the library.
std::atomic<bool> stop_requested{false};
extern "C" void RequestStop(int) { stop_requested = true; }

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGTERM, RequestStop);
  std::signal(SIGINT, RequestStop);
  return vtrain::agent::RunAgent(std::vector<std::string>(argv + 1, argv + argc), stop_requested,
                                 std::cout, std::cerr);
}
