#include "proto/shell_words.h"

#include <cctype>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "proto/shell_interpreter.h"
#include "proto/shell_lexer.h"

namespace vtrain::proto {
namespace internal {

absl::Status Interpreter::Statement(std::vector<const Token*> st) {
  const int line = st.front()->line;
  last_line_ = line;
  std::string head = Literal(*st.front());
  // Keywords that open or close blocks.
  if (head == "then" || head == "do" || head == "else" || head == "{" || head == "}") {
    if (head == "else") {
      if (blocks_.empty()) return Error(line, "else without if");
      IfFrame& f = blocks_.back();
      f.active = f.outer_active && !f.taken;
      f.taken = true;
    }
    st.erase(st.begin());
    if (st.empty()) return absl::OkStatus();
    return Statement(st);
  }
  if (head == "if" || head == "elif") {
    // The condition runs up to "then" (on this line, or the next statement).
    std::vector<const Token*> condition(st.begin() + 1, st.end());
    std::vector<const Token*> rest;
    for (size_t k = 0; k < condition.size(); ++k) {
      if (Literal(*condition[k]) == "then") {
        rest.assign(condition.begin() + static_cast<long>(k) + 1, condition.end());
        condition.resize(k);
        break;
      }
    }
    if (head == "if") {
      if (blocks_.size() >= 64) return Error(line, "if blocks nested deeper than 64");
      IfFrame f;
      f.outer_active = Active();
      blocks_.push_back(f);
    } else if (blocks_.empty()) {
      return Error(line, "elif without if");
    }
    IfFrame& f = blocks_.back();
    bool holds = false;
    if (f.outer_active && !f.taken) {
      absl::StatusOr<bool> v = Condition(condition, line);
      if (!v.ok()) return v.status();
      holds = *v;
    }
    f.active = f.outer_active && !f.taken && holds;
    f.taken = f.taken || holds;
    if (rest.empty()) return absl::OkStatus();
    return Statement(rest);
  }
  if (head == "fi") {
    if (blocks_.empty()) return Error(line, "fi without if");
    blocks_.pop_back();
    st.erase(st.begin());
    if (st.empty()) return absl::OkStatus();
    return Statement(st);
  }
  if (head == "for" || head == "while" || head == "until" || head == "case" || head == "select" ||
      head == "function") {
    // Not read: the block's statements are skipped to its end.
    skip_until_ = head == "case" ? "esac" : head == "function" ? "}" : "done";
    skip_depth_ = 1;
    script_.notes.push_back(
        absl::StrCat(name_, ":", line, ": a '", head, "' block is not read (skipped)"));
    skip_opener_ = head;
    skipping_ = true;
    return absl::OkStatus();
  }
  if (skipping_ || !Active()) return absl::OkStatus();
  return SimpleCommand(st);
}

absl::Status Interpreter::SimpleCommand(std::vector<const Token*> st) {
  const int line = st.front()->line;
  const std::string head = Literal(*st.front());
  // Assignments before a command (or alone), after export/readonly/declare/local.
  size_t k = 0;
  if (head == "export" || head == "readonly" || head == "declare" || head == "local" ||
      head == "typeset") {
    k = 1;
    while (k < st.size() && Literal(*st[k]).rfind("-", 0) == 0) ++k;
  }
  bool assigned = false;
  for (; k < st.size(); ++k) {
    const Token& t = *st[k];
    if (t.kind == Token::kArray) {
      absl::Status s = AssignArray(t);
      if (!s.ok()) return s;
      assigned = true;
      continue;
    }
    if (t.kind != Token::kWord || t.word.empty() || t.word[0].kind != Part::kUnquoted) break;
    const std::string& first = t.word[0].text;
    const size_t eq = first.find('=');
    if (eq == std::string::npos) {
      if (k > 0 &&
          (head == "export" || head == "readonly" || head == "declare" || head == "local" ||
           head == "typeset") &&
          IsShellName(first)) {
        continue;  // "export NAME": nothing to assign
      }
      break;
    }
    const bool append = eq > 0 && first[eq - 1] == '+';
    const std::string name = first.substr(0, eq - (append ? 1 : 0));
    if (!IsShellName(name)) break;
    Word value = t.word;
    value[0].text = first.substr(eq + 1);
    absl::StatusOr<std::string> v = Join(value, line);
    if (!v.ok()) return v.status();
    vars_[name] = append ? vars_[name] + *v : *v;
    arrays_.erase(name);
    assigned = true;
  }
  if (k >= st.size()) return absl::OkStatus();
  (void)assigned;
  // A command: its words as bash would pass them.
  std::vector<const Token*> words(st.begin() + static_cast<long>(k), st.end());
  const std::string command = Literal(*words.front());
  if (command == "unset") {
    for (size_t j = 1; j < words.size(); ++j) {
      vars_.erase(Literal(*words[j]));
      arrays_.erase(Literal(*words[j]));
    }
    return absl::OkStatus();
  }
  if (command == "exit") {
    exited_ = true;
    return absl::OkStatus();
  }
  ShellCommand c;
  c.line = line;
  for (const Token* t : words) {
    if (t->kind == Token::kSeparator) {
      c.words.push_back(t->separator);
      continue;
    }
    absl::Status s = Expand(t->word, line, c.words);
    if (!s.ok()) return s;
  }
  if (!c.words.empty()) script_.commands.push_back(std::move(c));
  return absl::OkStatus();
}

absl::StatusOr<bool> Interpreter::Condition(const std::vector<const Token*>& condition, int line) {
  // Groups of [ ... ] / [[ ... ]] / test ..., joined by && and ||, read
  // left to right.
  std::vector<std::string> words;
  for (const Token* t : condition) {
    if (t->kind == Token::kSeparator) {
      words.push_back(t->separator);
      continue;
    }
    std::vector<std::string> expanded;
    // Conditions keep each word whole (bash does not split inside [[ ]]).
    absl::StatusOr<std::string> w = Join(t->word, line);
    if (!w.ok()) return w.status();
    const bool quoted = t->word.size() != 1 || t->word[0].kind != Part::kUnquoted;
    words.push_back(quoted && w->empty() ? std::string("\x01") : *w);
  }
  bool result = false;
  std::string join = "";
  size_t i = 0;
  while (i < words.size()) {
    bool negate = false;
    if (words[i] == "!") {
      negate = true;
      ++i;
    }
    if (i >= words.size()) break;
    std::string open = words[i];
    std::string close = open == "[[" ? "]]" : open == "[" ? "]" : open == "test" ? "" : "?";
    if (close == "?") {
      return Error(line, absl::StrCat("cannot decide the condition '", absl::StrJoin(words, " "),
                                      "' without running it; give the arguments as a list"));
    }
    ++i;
    std::vector<std::string> args;
    while (i < words.size() && words[i] != close && words[i] != "&&" && words[i] != "||") {
      args.push_back(words[i] == "\x01" ? "" : words[i]);
      ++i;
    }
    if (!close.empty() && i < words.size() && words[i] == close) ++i;
    absl::StatusOr<bool> v = Test(args, line);
    if (!v.ok()) return v.status();
    const bool value = negate != *v;
    result = join.empty() ? value : join == "&&" ? (result && value) : (result || value);
    if (i < words.size() && (words[i] == "&&" || words[i] == "||")) {
      join = words[i];
      ++i;
    }
  }
  return result;
}

absl::StatusOr<bool> Interpreter::Test(std::vector<std::string> a, int line) {
  bool negate = false;
  while (!a.empty() && a.front() == "!") {
    negate = !negate;
    a.erase(a.begin());
  }
  auto done = [negate](bool v) { return negate != v; };
  if (a.size() == 1) return done(!a[0].empty());
  if (a.size() == 2) {
    if (a[0] == "-n") return done(!a[1].empty());
    if (a[0] == "-z") return done(a[1].empty());
    // File tests: the script's files are assumed present (none is opened).
    if (a[0] == "-f" || a[0] == "-d" || a[0] == "-e" || a[0] == "-r" || a[0] == "-x" ||
        a[0] == "-s") {
      script_.notes.push_back(absl::StrCat(name_, ":", line, ": assumed the test '", a[0], " ",
                                           a[1], "' holds (no file is opened)"));
      return done(true);
    }
  }
  if (a.size() == 3) {
    if (a[1] == "=" || a[1] == "==") return done(a[0] == a[2]);
    if (a[1] == "!=") return done(a[0] != a[2]);
    int64_t x = 0, y = 0;
    if (absl::SimpleAtoi(a[0], &x) && absl::SimpleAtoi(a[2], &y)) {
      if (a[1] == "-eq") return done(x == y);
      if (a[1] == "-ne") return done(x != y);
      if (a[1] == "-lt") return done(x < y);
      if (a[1] == "-le") return done(x <= y);
      if (a[1] == "-gt") return done(x > y);
      if (a[1] == "-ge") return done(x >= y);
    }
  }
  return Error(line, absl::StrCat("cannot decide the test '", absl::StrJoin(a, " "),
                                  "'; give the arguments as a list, or set what it tests"));
}

absl::StatusOr<ShellScript> Interpreter::RunAll(const std::vector<Token>& tokens) {
  size_t i = 0;
  while (i < tokens.size()) {
    std::vector<const Token*> statement;
    while (i < tokens.size()) {
      const Token& t = tokens[i++];
      if (t.kind == Token::kSeparator && t.separator != "&&" && t.separator != "||" &&
          t.separator != "|") {
        break;
      }
      if (t.kind == Token::kSeparator && statement.empty()) continue;
      statement.push_back(&t);
    }
    if (statement.empty()) continue;
    if (Skip(statement)) continue;
    absl::Status s = Statement(statement);
    if (!s.ok()) return s;
    if (exited_) break;
  }
  if (skipping_) {
    return Error(last_line_,
                 absl::StrCat("a '", skip_opener_, "' block without its ", skip_until_));
  }
  if (!blocks_.empty()) return Error(last_line_, "an if block without its fi");
  script_.variables = vars_;
  return std::move(script_);
}

}  // namespace internal

absl::StatusOr<ShellScript> ReadShell(absl::string_view text, absl::string_view name) {
  if (static_cast<int64_t>(text.size()) > kMaxShellBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": ", text.size(), " bytes; a launch script is at most ", kMaxShellBytes, " bytes"));
  }
  if (text.find('\0') != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": holds a NUL byte; a launch script is text"));
  }
  absl::StatusOr<std::vector<internal::Token>> tokens = internal::LexShell(text, name);
  if (!tokens.ok()) return tokens.status();
  internal::Interpreter interpreter(name);
  return interpreter.RunAll(*tokens);
}

}  // namespace vtrain::proto
