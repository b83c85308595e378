// Internal to proto/shell_words.cc: the words of a bash script as tokens,
// and $(( ... )) arithmetic. Nothing here runs anything.
#ifndef VTRAIN_PROTO_SHELL_LEXER_H_
#define VTRAIN_PROTO_SHELL_LEXER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace vtrain::proto::internal {

// A piece of a word: single-quoted text is literal; double-quoted and
// unquoted text is expanded, and only unquoted expansions are split.
struct Part {
  enum Kind { kSingle, kDouble, kUnquoted } kind = kUnquoted;
  std::string text;
};
using Word = std::vector<Part>;

struct Token {
  enum Kind { kWord, kArray, kSeparator } kind = kWord;
  Word word;                   // kWord; kArray: the "NAME=" or "NAME+=" part
  std::vector<Word> elements;  // kArray
  std::string separator;       // kSeparator: "\n", ";", "&&", "||", "|", "&"
  int line = 0;
};

// A shell variable name.
bool IsShellName(absl::string_view s);

// The tokens of `text` (errors "NAME:LINE: ...": an unterminated quote or
// array, a heredoc).
absl::StatusOr<std::vector<Token>> LexShell(absl::string_view text, absl::string_view name);

// An integer expression of + - * / % and parentheses over numbers and the
// names of `vars` (unset: 0).
absl::StatusOr<int64_t> EvalArithmetic(absl::string_view expression,
                                       const std::map<std::string, std::string>& vars);

}  // namespace vtrain::proto::internal

#endif  // VTRAIN_PROTO_SHELL_LEXER_H_
