// vtrainctl: the command-line client. Parses nothing itself; hands argv to
// the subcommand dispatcher.
#include <iostream>
#include <string>
#include <vector>

#include "client/commands.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return vtrain::cli::RunVtrainctl(args, std::cout, std::cerr);
}
