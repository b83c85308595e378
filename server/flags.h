// vtrain-server's command line: the table of its flags, each spelt with
// dashes (--push-token-file) or underscores (--push_token_file), parsed as
// given (argv is never rewritten) into ServerOptions.
#ifndef VTRAIN_SERVER_FLAGS_H_
#define VTRAIN_SERVER_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/options.h"

namespace vtrain::server {

struct CommandLine {
  ServerOptions options;
  std::string push_token_file;  // read by main into options.push_token
  int grace_seconds = 10;       // how long in-flight calls may finish on SIGTERM
  bool help = false;            // --help: print Usage() and exit 0
  std::string check_db;         // --check-db FILE: check that file and exit
};

// Parses the arguments after the program name: "--name=value",
// "--name value" and, for switches, "--name" or "--name=true|false".
// INVALID_ARGUMENT names the first unknown flag, missing or malformed value,
// or stray argument, and the fix; it also checks the values' ranges and
// --role.
absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args);

// What --help prints: the purpose, an example and one line per flag with its
// default.
std::string Usage();

}  // namespace vtrain::server

#endif  // VTRAIN_SERVER_FLAGS_H_
