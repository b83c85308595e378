// vtrainctl: the command-line client. Parses nothing itself; hands argv to
// the subcommand dispatcher.
#include <exception>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "client/commands.h"
#include "common/exit_codes.h"

int main(int argc, char** argv) {
  // Library code reports errors as Status; what could still be thrown (an
  // allocation failing under a memory limit) ends the run with a message,
  // never an abort.
  try {
    std::vector<std::string> args(argv + 1, argv + argc);
    return vtrain::client::RunVtrainctl(args, std::cout, std::cerr);
  } catch (const std::bad_alloc&) {
    std::cerr << "vtrainctl: out of memory; give a smaller input or raise the memory limit\n";
  } catch (const std::exception& e) {
    std::cerr << "vtrainctl: internal error: " << e.what() << "\n";
  }
  return vtrain::common::kExitFailure;
}
