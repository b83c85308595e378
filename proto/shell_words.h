// A static reader of the bash that launch scripts are written in: it finds
// the words a command line would pass to a program, never running anything.
// It follows what Megatron-LM's examples/ scripts use: assignments (VAR=v,
// export VAR=v, VAR=${OTHER:-default}, $((arithmetic))), bash arrays
// (NAME=( ... ), NAME+=( ... )) and their expansion, quoting, comments,
// backslash continuations, and if/elif/else blocks whose conditions compare
// known strings. Command substitutions ($(...), `...`) are not run: they
// expand to nothing and are reported. Loops, case blocks, functions and
// heredocs are not read.
#ifndef VTRAIN_PROTO_SHELL_WORDS_H_
#define VTRAIN_PROTO_SHELL_WORDS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace vtrain::proto {

// One simple command as it would run: its words after expansion, and the
// line of the script it starts on.
struct ShellCommand {
  std::vector<std::string> words;
  int line = 0;
};

struct ShellScript {
  std::vector<ShellCommand> commands;            // every command run, in order (assignments aside)
  std::map<std::string, std::string> variables;  // scalars at the end of the script
  std::vector<std::string> notes;  // what was not read (a substitution not run, a loop skipped)
};

// Limits: a script of at most kMaxShellBytes; at most kMaxShellWords words
// after expansion (arrays cannot grow without bound); nesting of at most 64.
inline constexpr int64_t kMaxShellBytes = 1 << 20;
inline constexpr int64_t kMaxShellWords = 1 << 18;

// Reads `text`. `name` prefixes error messages ("NAME:LINE: ..."):
// INVALID_ARGUMENT for an unterminated quote or array, a heredoc, a
// condition it cannot decide, a script past the limits.
absl::StatusOr<ShellScript> ReadShell(absl::string_view text, absl::string_view name);

}  // namespace vtrain::proto

#endif  // VTRAIN_PROTO_SHELL_WORDS_H_
