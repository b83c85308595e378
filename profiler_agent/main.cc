// vtrain-agent: hands argv to the command dispatcher; SIGTERM and SIGINT ask
// `serve` to stop after its current run.
#include <atomic>
#include <csignal>
#include <exception>
#include <iostream>
#include <new>
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
  // Whatever could still be thrown (an allocation failing under a memory
  // limit) ends the run with a message, never an abort.
  try {
    return vtrain::agent::RunAgent(std::vector<std::string>(argv + 1, argv + argc), stop_requested,
                                   std::cout, std::cerr);
  } catch (const std::bad_alloc&) {
    std::cerr << "vtrain-agent: out of memory; give a smaller input or raise the memory limit\n";
  } catch (const std::exception& e) {
    std::cerr << "vtrain-agent: internal error: " << e.what() << "\n";
  }
  return 1;
}
