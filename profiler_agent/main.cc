// vtrain-agent: hands argv to the command dispatcher.
#include <iostream>
#include <string>
#include <vector>

#include "profiler_agent/agent_commands.h"

int main(int argc, char** argv) {
  return vtrain::agent::RunAgent(std::vector<std::string>(argv + 1, argv + argc), std::cout,
                                 std::cerr);
}
