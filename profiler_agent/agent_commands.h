// vtrain-agent's commands that need no GPU: importing existing measurements
// and pushing profile sets to a registry (with retries).
#ifndef VTRAIN_PROFILER_AGENT_AGENT_COMMANDS_H_
#define VTRAIN_PROFILER_AGENT_AGENT_COMMANDS_H_

#include <atomic>
#include <ostream>
#include <string>
#include <vector>

namespace vtrain::agent {

// Dispatches argv[1..]; returns the exit code (0, 1 failure, 2 bad input).
// `serve` returns once `stop` is set (the binary sets it on SIGTERM/SIGINT).
int RunAgent(const std::vector<std::string>& args, const std::atomic<bool>& stop, std::ostream& out,
             std::ostream& err);
// The same with a stop flag that is never set.
int RunAgent(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace vtrain::agent

#endif  // VTRAIN_PROFILER_AGENT_AGENT_COMMANDS_H_
