// Internal to proto/shell_words.cc and proto/shell_expand.cc: the static
// bash reader's state and statements (shell_words.cc) and its expansion of
// words (shell_expand.cc).
#ifndef VTRAIN_PROTO_SHELL_INTERPRETER_H_
#define VTRAIN_PROTO_SHELL_INTERPRETER_H_

#include <cctype>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "proto/shell_lexer.h"
#include "proto/shell_words.h"

namespace vtrain::proto::internal {

class Interpreter {
 public:
  explicit Interpreter(absl::string_view name) : name_(name) {}

 private:
  struct IfFrame {
    bool outer_active = true;  // the enclosing code runs
    bool taken = false;        // a branch was taken
    bool active = false;       // the current branch runs
  };

  absl::Status Error(int line, absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(name_, ":", line, ": ", what));
  }
  bool Active() const { return blocks_.empty() || blocks_.back().active; }

  // The first word's unquoted literal text ("" when it has quotes or $).
  static std::string Literal(const Token& t) {
    if (t.kind != Token::kWord || t.word.size() != 1 || t.word[0].kind != Part::kUnquoted ||
        t.word[0].text.find('$') != std::string::npos) {
      return "";
    }
    return t.word[0].text;
  }

  // One statement: block keywords (if, elif, else, fi, loops) here, the
  // rest by SimpleCommand (assignments, then a command's words).
  absl::Status Statement(std::vector<const Token*> st);
  absl::Status SimpleCommand(std::vector<const Token*> st);

  // Skipped blocks: the statements of a loop or case are not run. Called
  // for each statement before Statement; counts nesting by the keywords.
 public:
  bool Skip(const std::vector<const Token*>& st) {
    if (!skipping_) return false;
    const std::string head = Literal(*st.front());
    for (const Token* t : st) {
      const std::string w = Literal(*t);
      if (w == skip_opener_ && t != st.front()) ++skip_depth_;
      if (w == skip_until_ && --skip_depth_ == 0) {
        skipping_ = false;
        return true;
      }
    }
    (void)head;
    return true;
  }

 private:
  absl::StatusOr<bool> Condition(const std::vector<const Token*>& condition, int line);

  absl::StatusOr<bool> Test(std::vector<std::string> a, int line);

  absl::Status AssignArray(const Token& t);

  // The value of ${...} or $NAME's body (without the $ and braces).
  absl::StatusOr<std::string> Parameter(absl::string_view body, int line, bool* is_array_all,
                                        std::vector<std::string>* elements);

  std::string Value(const std::string& name) const {
    if (!name.empty() && std::isdigit(static_cast<unsigned char>(name[0]))) return "";  // $1 ...
    if (name == "#") return "0";
    auto it = vars_.find(name);
    if (it != vars_.end()) return it->second;
    auto a = arrays_.find(name);
    if (a != arrays_.end() && !a->second.empty()) return a->second.front();
    return "";
  }

  // Expands the $-expressions of `text` (no splitting). `elements` receives
  // the elements of a lone "${A[@]}".
  absl::StatusOr<std::string> ExpandText(absl::string_view text, int line, bool* array_all,
                                         std::vector<std::string>* elements);

  static size_t MatchingBrace(absl::string_view text, size_t open) {
    int depth = 0;
    char quote = 0;
    for (size_t j = open; j < text.size(); ++j) {
      const char c = text[j];
      if (quote) {
        if (c == quote) quote = 0;
        continue;
      }
      if (c == '\'' || c == '"') quote = c;
      if (c == '{') ++depth;
      if (c == '}' && --depth == 0) return j;
    }
    return absl::string_view::npos;
  }

  // A word as one string (assignments and conditions: no splitting).
  absl::StatusOr<std::string> Join(const Word& word, int line) {
    std::string out;
    for (const Part& p : word) {
      if (p.kind == Part::kSingle) {
        out += p.text;
        continue;
      }
      bool all = false;
      std::vector<std::string> elems;
      absl::StatusOr<std::string> v = ExpandText(p.text, line, &all, &elems);
      if (!v.ok()) return v.status();
      out += *v;
    }
    return out;
  }

  // A word as the fields bash would make of it: unquoted expansions split
  // on blanks, quoted parts kept, a quoted "${A[@]}" one field an element.
  absl::Status Expand(const Word& word, int line, std::vector<std::string>& fields);

  absl::string_view name_;
  std::map<std::string, std::string> vars_;
  std::map<std::string, std::vector<std::string>> arrays_;
  std::vector<IfFrame> blocks_;
  ShellScript script_;
  bool exited_ = false;
  bool skipping_ = false;
  std::string skip_until_, skip_opener_;
  int skip_depth_ = 0;
  int last_line_ = 0;
  int64_t words_ = 0;

 public:
  // Runs the statements, skipping loops (Skip) before each.
  absl::StatusOr<ShellScript> RunAll(const std::vector<Token>& tokens);
};

}  // namespace vtrain::proto::internal

#endif  // VTRAIN_PROTO_SHELL_INTERPRETER_H_
