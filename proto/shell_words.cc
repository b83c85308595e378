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

namespace vtrain::proto {
namespace {

// A piece of a word: single-quoted text is literal; double-quoted and
// unquoted text is expanded, and only unquoted expansions are split.
struct Part {
  enum Kind { kSingle, kDouble, kUnquoted } kind = kUnquoted;
  std::string text;
};
using Word = std::vector<Part>;

struct Token {
  enum Kind { kWord, kArray, kSeparator } kind = kWord;
  Word word;                  // kWord; kArray: the "NAME=" or "NAME+=" part
  std::vector<Word> elements;  // kArray
  std::string separator;      // kSeparator: "\n", ";", "&&", "||", "|", "&"
  int line = 0;
};

bool IsName(absl::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

class Lexer {
 public:
  Lexer(absl::string_view text, absl::string_view name) : s_(text), name_(name) {}

  absl::StatusOr<std::vector<Token>> Tokens() {
    std::vector<Token> out;
    while (true) {
      SkipBlanks();
      if (i_ >= s_.size()) break;
      const char c = s_[i_];
      if (c == '#') {
        SkipComment();
        continue;
      }
      if (c == '\n' || c == ';' || c == '&' || c == '|') {
        Token t;
        t.kind = Token::kSeparator;
        t.line = line_;
        if ((c == '&' || c == '|') && i_ + 1 < s_.size() && s_[i_ + 1] == c) {
          t.separator = std::string(2, c);
          i_ += 2;
        } else {
          t.separator = std::string(1, c);
          ++i_;
        }
        if (c == '\n') ++line_;
        out.push_back(std::move(t));
        continue;
      }
      if (c == '<' && i_ + 1 < s_.size() && s_[i_ + 1] == '<') {
        return Error("a heredoc (<<) is not read; put the arguments in the script itself");
      }
      Token t;
      t.line = line_;
      const size_t before = i_;
      if (absl::Status s = ReadWord(t.word); !s.ok()) return s;
      if (i_ == before) {
        ++i_;  // a lone ')' (the end of a subshell or function): no word
        continue;
      }
      if (t.word.empty()) continue;  // a redirection, or a continuation alone
      // NAME=( ... ) or NAME+=( ... ): an array.
      if (t.word.size() == 1 && t.word[0].kind == Part::kUnquoted && i_ < s_.size() &&
          s_[i_] == '(') {
        absl::string_view w = t.word[0].text;
        const bool append = w.size() >= 2 && w.substr(w.size() - 2) == "+=";
        if (!w.empty() && w.back() == '=' &&
            IsName(w.substr(0, w.size() - (append ? 2 : 1)))) {
          ++i_;
          if (absl::Status s = ReadArray(t.elements); !s.ok()) return s;
          t.kind = Token::kArray;
        }
      }
      out.push_back(std::move(t));
    }
    return out;
  }

 private:
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(name_, ":", line_, ": ", what));
  }
  void SkipBlanks() {
    while (i_ < s_.size()) {
      if (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\r') {
        ++i_;
      } else if (s_[i_] == '\\' && i_ + 1 < s_.size() && s_[i_ + 1] == '\n') {
        i_ += 2;
        ++line_;
      } else {
        break;
      }
    }
  }
  void SkipComment() {
    while (i_ < s_.size() && s_[i_] != '\n') ++i_;
  }
  // Reads a balanced $(...), ${...} or $((...)) starting at s_[i_] == '$'
  // into `out`, quotes inside kept.
  absl::Status ReadDollar(std::string& out) {
    out += s_[i_++];
    if (i_ >= s_.size()) return absl::OkStatus();
    const char open = s_[i_];
    if (open != '(' && open != '{') {
      while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) ||
                                s_[i_] == '_' || (out == "$" && (s_[i_] == '@' || s_[i_] == '#' ||
                                                                 s_[i_] == '?' || s_[i_] == '*')))) {
        const bool special = !std::isalnum(static_cast<unsigned char>(s_[i_])) && s_[i_] != '_';
        out += s_[i_++];
        if (special || (out.size() == 2 && std::isdigit(static_cast<unsigned char>(out[1])))) break;
      }
      return absl::OkStatus();
    }
    const char close = open == '(' ? ')' : '}';
    int depth = 0;
    char quote = 0;
    while (i_ < s_.size()) {
      const char c = s_[i_];
      out += c;
      ++i_;
      if (c == '\n') ++line_;
      if (quote) {
        if (c == quote) quote = 0;
        continue;
      }
      if (c == '\'' || c == '"') {
        quote = c;
      } else if (c == open) {
        ++depth;
      } else if (c == close && --depth == 0) {
        return absl::OkStatus();
      }
      if (depth > 64) return Error("expansions nested deeper than 64");
    }
    return Error(absl::StrCat("an unterminated ", open == '(' ? "$(" : "${"));
  }
  absl::Status ReadWord(Word& word) {
    auto part = [&word](Part::Kind kind) -> std::string& {
      if (word.empty() || word.back().kind != kind) word.push_back(Part{kind, ""});
      return word.back().text;
    };
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == ';' || c == '&' || c == '|' ||
          c == ')' || (c == '(' && !word.empty()) || c == '<' || c == '>') {
        if ((c == '<' || c == '>') && word.empty()) {
          // A redirection: its target is the next word, skipped.
          ++i_;
          if (i_ < s_.size() && (s_[i_] == '>' || s_[i_] == '&')) ++i_;
          if (i_ < s_.size() && s_[i_] == '<') return Error("a heredoc (<<) is not read");
          SkipBlanks();
          Word target;
          return ReadWord(target);
        }
        break;
      }
      if (c == '(' && word.empty()) {
        ++i_;  // a subshell or function parenthesis: ignored
        continue;
      }
      if (c == '\\') {
        if (i_ + 1 < s_.size() && s_[i_ + 1] == '\n') {
          i_ += 2;
          ++line_;
          break;  // a continuation ends the word
        }
        if (i_ + 1 < s_.size()) part(Part::kSingle) += s_[i_ + 1];
        i_ += 2;
        continue;
      }
      if (c == '\'') {
        const size_t end = s_.find('\'', i_ + 1);
        if (end == absl::string_view::npos) return Error("an unterminated ' quote");
        absl::string_view body = s_.substr(i_ + 1, end - i_ - 1);
        line_ += static_cast<int>(std::count(body.begin(), body.end(), '\n'));
        // A new part, so that "''" still makes a word.
        word.push_back(Part{Part::kSingle, std::string(body)});
        i_ = end + 1;
        continue;
      }
      if (c == '"') {
        ++i_;
        std::string body;
        bool closed = false;
        while (i_ < s_.size()) {
          const char d = s_[i_];
          if (d == '"') {
            ++i_;
            closed = true;
            break;
          }
          if (d == '\\' && i_ + 1 < s_.size()) {
            const char e = s_[i_ + 1];
            if (e == '\n') {
              ++line_;
            } else if (e == '"' || e == '\\' || e == '`') {
              body += e;
            } else if (e == '$') {
              body += "\\$";
            } else {
              body += d;
              body += e;
            }
            i_ += 2;
            continue;
          }
          if (d == '$') {
            if (absl::Status s = ReadDollar(body); !s.ok()) return s;
            continue;
          }
          if (d == '\n') ++line_;
          body += d;
          ++i_;
        }
        if (!closed) return Error("an unterminated \" quote");
        word.push_back(Part{Part::kDouble, std::move(body)});
        continue;
      }
      if (c == '`') {
        const size_t end = s_.find('`', i_ + 1);
        if (end == absl::string_view::npos) return Error("an unterminated ` quote");
        part(Part::kUnquoted) += absl::StrCat("$(", s_.substr(i_ + 1, end - i_ - 1), ")");
        i_ = end + 1;
        continue;
      }
      if (c == '$') {
        std::string raw;
        if (absl::Status s = ReadDollar(raw); !s.ok()) return s;
        part(Part::kUnquoted) += raw;
        continue;
      }
      part(Part::kUnquoted) += c;
      ++i_;
    }
    return absl::OkStatus();
  }
  absl::Status ReadArray(std::vector<Word>& elements) {
    while (true) {
      while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) {
        if (s_[i_] == '\n') ++line_;
        ++i_;
      }
      if (i_ >= s_.size()) return Error("an unterminated array ( ... )");
      if (s_[i_] == '#') {
        SkipComment();
        continue;
      }
      if (s_[i_] == '\\' && i_ + 1 < s_.size() && s_[i_ + 1] == '\n') {
        i_ += 2;
        ++line_;
        continue;
      }
      if (s_[i_] == ')') {
        ++i_;
        return absl::OkStatus();
      }
      Word w;
      const size_t before = i_;
      if (absl::Status s = ReadWord(w); !s.ok()) return s;
      if (i_ == before) return Error(absl::StrCat("unexpected '", s_.substr(i_, 1), "' in an array"));
      if (!w.empty()) elements.push_back(std::move(w));
    }
  }

  absl::string_view s_;
  absl::string_view name_;
  size_t i_ = 0;
  int line_ = 1;
};

// Integer arithmetic of $(( ... )): + - * / % and parentheses over numbers
// and variable names.
class Arithmetic {
 public:
  Arithmetic(absl::string_view e, const std::map<std::string, std::string>& vars)
      : e_(e), vars_(vars) {}
  absl::StatusOr<int64_t> Value() {
    absl::StatusOr<int64_t> v = Sum();
    Skip();
    if (v.ok() && i_ != e_.size()) {
      return absl::InvalidArgumentError(absl::StrCat("cannot evaluate $((", e_, "))"));
    }
    return v;
  }

 private:
  void Skip() {
    while (i_ < e_.size() && std::isspace(static_cast<unsigned char>(e_[i_]))) ++i_;
  }
  absl::StatusOr<int64_t> Sum() {
    absl::StatusOr<int64_t> v = Product();
    while (v.ok()) {
      Skip();
      if (i_ >= e_.size() || (e_[i_] != '+' && e_[i_] != '-')) break;
      const char op = e_[i_++];
      absl::StatusOr<int64_t> r = Product();
      if (!r.ok()) return r;
      v = op == '+' ? *v + *r : *v - *r;
    }
    return v;
  }
  absl::StatusOr<int64_t> Product() {
    absl::StatusOr<int64_t> v = Atom();
    while (v.ok()) {
      Skip();
      if (i_ >= e_.size() || (e_[i_] != '*' && e_[i_] != '/' && e_[i_] != '%')) break;
      const char op = e_[i_++];
      absl::StatusOr<int64_t> r = Atom();
      if (!r.ok()) return r;
      if (op != '*' && *r == 0) return absl::InvalidArgumentError("division by zero in $((...))");
      // Bounded: launch-script numbers are small; refuse what would overflow.
      if (op == '*' && *v != 0 && std::abs(*r) > (int64_t{1} << 40) / std::max<int64_t>(1, std::abs(*v))) {
        return absl::InvalidArgumentError("a product in $((...)) is too large");
      }
      v = op == '*' ? *v * *r : op == '/' ? *v / *r : *v % *r;
    }
    return v;
  }
  absl::StatusOr<int64_t> Atom() {
    Skip();
    if (i_ >= e_.size()) return absl::InvalidArgumentError("an incomplete $((...))");
    if (++depth_ > 64) return absl::InvalidArgumentError("$((...)) nested too deeply");
    if (e_[i_] == '(') {
      ++i_;
      absl::StatusOr<int64_t> v = Sum();
      Skip();
      if (i_ >= e_.size() || e_[i_] != ')') return absl::InvalidArgumentError("an unclosed ( in $((...))");
      ++i_;
      return v;
    }
    if (e_[i_] == '-') {
      ++i_;
      absl::StatusOr<int64_t> v = Atom();
      if (!v.ok()) return v;
      return -*v;
    }
    if (e_[i_] == '$') ++i_;
    const size_t start = i_;
    while (i_ < e_.size() && (std::isalnum(static_cast<unsigned char>(e_[i_])) || e_[i_] == '_')) ++i_;
    absl::string_view token = e_.substr(start, i_ - start);
    if (token.empty()) return absl::InvalidArgumentError(absl::StrCat("cannot evaluate $((", e_, "))"));
    int64_t v = 0;
    if (absl::SimpleAtoi(token, &v)) return v;
    auto it = vars_.find(std::string(token));
    if (it == vars_.end() || it->second.empty()) return 0;
    if (!absl::SimpleAtoi(it->second, &v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("$((", e_, ")): ", token, "='", it->second, "' is not an integer"));
    }
    return v;
  }

  absl::string_view e_;
  const std::map<std::string, std::string>& vars_;
  size_t i_ = 0;
  int depth_ = 0;
};

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

  absl::Status Statement(std::vector<const Token*> st) {
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
    if (head == "for" || head == "while" || head == "until" || head == "case" ||
        head == "select" || head == "function") {
      // Not read: the block's statements are skipped to its end.
      skip_until_ = head == "case" ? "esac" : head == "function" ? "}" : "done";
      skip_depth_ = 1;
      script_.notes.push_back(
          absl::StrCat(name_, ":", line, ": a '", head, "' block is not read (skipped)"));
      skip_opener_ = head;
      skipping_ = true;
      return absl::OkStatus();
    }
    if (skipping_) return absl::OkStatus();
    if (!Active()) return absl::OkStatus();
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
        if (k > 0 && (head == "export" || head == "readonly" || head == "declare" ||
                      head == "local" || head == "typeset") && IsName(first)) {
          continue;  // "export NAME": nothing to assign
        }
        break;
      }
      const bool append = eq > 0 && first[eq - 1] == '+';
      const std::string name = first.substr(0, eq - (append ? 1 : 0));
      if (!IsName(name)) break;
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
  absl::StatusOr<bool> Condition(const std::vector<const Token*>& condition, int line) {
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

  absl::StatusOr<bool> Test(std::vector<std::string> a, int line) {
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
        script_.notes.push_back(absl::StrCat(name_, ":", line, ": assumed the test '", a[0],
                                             " ", a[1], "' holds (no file is opened)"));
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

  absl::Status AssignArray(const Token& t) {
    std::string name = t.word[0].text;
    const bool append = name.size() >= 2 && name.substr(name.size() - 2) == "+=";
    name = name.substr(0, name.size() - (append ? 2 : 1));
    std::vector<std::string> values;
    for (const Word& w : t.elements) {
      absl::Status s = Expand(w, t.line, values);
      if (!s.ok()) return s;
    }
    std::vector<std::string>& array = arrays_[name];
    if (!append) array.clear();
    for (std::string& v : values) array.push_back(std::move(v));
    vars_.erase(name);
    return absl::OkStatus();
  }

  // The value of ${...} or $NAME's body (without the $ and braces).
  absl::StatusOr<std::string> Parameter(absl::string_view body, int line, bool* is_array_all,
                                        std::vector<std::string>* elements) {
    *is_array_all = false;
    // ${NAME[@]}, ${NAME[*]}, ${NAME[i]}
    const size_t bracket = body.find('[');
    if (bracket != absl::string_view::npos && body.back() == ']') {
      const std::string name(body.substr(0, bracket));
      absl::string_view index = body.substr(bracket + 1, body.size() - bracket - 2);
      auto it = arrays_.find(name);
      static const std::vector<std::string> kEmpty;
      const std::vector<std::string>& array = it == arrays_.end() ? kEmpty : it->second;
      if (index == "@" || index == "*") {
        *is_array_all = index == "@";
        *elements = array;
        return absl::StrJoin(array, " ");
      }
      int64_t n = 0;
      if (!absl::SimpleAtoi(index, &n)) return Error(line, absl::StrCat("${", body, "}: an index must be a number"));
      return n >= 0 && static_cast<size_t>(n) < array.size() ? array[static_cast<size_t>(n)] : "";
    }
    // ${NAME:-default}, ${NAME-default}, ${NAME:=default}, ${NAME:+alt}
    size_t op = body.find_first_of(":-=+?");
    const std::string name(body.substr(0, op));
    std::string value = Value(name);
    const bool set = vars_.count(name) > 0 || arrays_.count(name) > 0;
    if (op == absl::string_view::npos) return value;
    absl::string_view rest = body.substr(op);
    const bool colon = rest[0] == ':';
    if (colon) rest.remove_prefix(1);
    if (rest.empty()) return Error(line, absl::StrCat("${", body, "} is not read"));
    const char kind = rest[0];
    absl::string_view word = rest.substr(1);
    const bool unset_or_null = colon ? value.empty() : !set;
    auto expand_word = [&]() -> absl::StatusOr<std::string> {
      Lexer lexer(word, name_);
      absl::StatusOr<std::vector<Token>> tokens = lexer.Tokens();
      if (!tokens.ok()) return tokens.status();
      std::string out;
      for (const Token& t : *tokens) {
        if (t.kind != Token::kWord) continue;
        absl::StatusOr<std::string> w = Join(t.word, line);
        if (!w.ok()) return w.status();
        absl::StrAppend(&out, out.empty() ? "" : " ", *w);
      }
      return out;
    };
    switch (kind) {
      case '-':
        if (unset_or_null) return expand_word();
        return value;
      case '=':
        if (unset_or_null) {
          absl::StatusOr<std::string> w = expand_word();
          if (!w.ok()) return w;
          vars_[name] = *w;
          return w;
        }
        return value;
      case '+':
        if (unset_or_null) return std::string();
        return expand_word();
      default:
        return Error(line, absl::StrCat("${", body, "} is not read"));
    }
  }

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
                                         std::vector<std::string>* elements) {
    std::string out;
    *array_all = false;
    size_t i = 0;
    while (i < text.size()) {
      const char c = text[i];
      if (c == '\\' && i + 1 < text.size() && text[i + 1] == '$') {
        out += '$';
        i += 2;
        continue;
      }
      if (c != '$' || i + 1 >= text.size()) {
        out += c;
        ++i;
        continue;
      }
      const char n = text[i + 1];
      if (n == '(') {
        // $(( ... )) arithmetic, or $( ... ): not run.
        const bool arith = i + 2 < text.size() && text[i + 2] == '(';
        int depth = 0;
        size_t j = i + 1;
        for (; j < text.size(); ++j) {
          if (text[j] == '(') ++depth;
          if (text[j] == ')' && --depth == 0) break;
        }
        absl::string_view inner = text.substr(i + 2, j - i - 2);
        if (arith && inner.size() >= 2 && inner.back() == ')') {
          inner = inner.substr(1, inner.size() - 2);
          bool unused = false;
          std::vector<std::string> none;
          absl::StatusOr<std::string> expanded = ExpandText(inner, line, &unused, &none);
          if (!expanded.ok()) return expanded.status();
          absl::StatusOr<int64_t> v = Arithmetic(*expanded, vars_).Value();
          if (!v.ok()) return Error(line, v.status().message());
          absl::StrAppend(&out, *v);
        } else {
          script_.notes.push_back(absl::StrCat(name_, ":", line, ": the command substitution $(",
                                               inner, ") was not run (read as empty)"));
        }
        i = j + 1;
        continue;
      }
      if (n == '{') {
        const size_t end = MatchingBrace(text, i + 1);
        if (end == absl::string_view::npos) return Error(line, "an unterminated ${");
        absl::string_view body = text.substr(i + 2, end - i - 2);
        bool all = false;
        std::vector<std::string> elems;
        absl::StatusOr<std::string> v = Parameter(body, line, &all, &elems);
        if (!v.ok()) return v.status();
        if (all && i == 0 && end + 1 == text.size()) {
          *array_all = true;
          *elements = std::move(elems);
        }
        out += *v;
        i = end + 1;
        continue;
      }
      size_t j = i + 1;
      if (std::isdigit(static_cast<unsigned char>(n)) || n == '#' || n == '@' || n == '*' ||
          n == '?') {
        j = i + 2;
      } else {
        while (j < text.size() &&
               (std::isalnum(static_cast<unsigned char>(text[j])) || text[j] == '_')) {
          ++j;
        }
      }
      if (j == i + 1) {
        out += c;
        ++i;
        continue;
      }
      const std::string name(text.substr(i + 1, j - i - 1));
      out += name == "@" || name == "*" || name == "?" ? std::string(name == "?" ? "0" : "")
                                                       : Value(name);
      i = j;
    }
    return out;
  }

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
  absl::Status Expand(const Word& word, int line, std::vector<std::string>& fields) {
    std::vector<std::string> out;
    bool open = false;  // whether out.back() takes more text
    for (const Part& p : word) {
      if (p.kind == Part::kSingle) {
        if (!open) out.emplace_back();
        out.back() += p.text;
        open = true;
        continue;
      }
      bool all = false;
      std::vector<std::string> elems;
      absl::StatusOr<std::string> v = ExpandText(p.text, line, &all, &elems);
      if (!v.ok()) return v.status();
      if (p.kind == Part::kDouble) {
        if (all && word.size() == 1) {
          for (std::string& e : elems) out.push_back(std::move(e));
          open = false;
          continue;
        }
        if (!open) out.emplace_back();
        out.back() += *v;
        open = true;
        continue;
      }
      // Unquoted: split on blanks.
      const std::string& text = *v;
      size_t i = 0;
      if (!text.empty() && std::isspace(static_cast<unsigned char>(text[0]))) open = false;
      while (i < text.size()) {
        while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) {
          open = false;
          ++i;
        }
        if (i >= text.size()) break;
        size_t j = i;
        while (j < text.size() && !std::isspace(static_cast<unsigned char>(text[j]))) ++j;
        if (!open) out.emplace_back();
        out.back() += text.substr(i, j - i);
        open = true;
        i = j;
      }
    }
    for (std::string& f : out) fields.push_back(std::move(f));
    words_ += static_cast<int64_t>(out.size());
    if (words_ > kMaxShellWords) {
      return Error(line, absl::StrCat("the script expands to more than ", kMaxShellWords,
                                      " words; it is not a launch script"));
    }
    return absl::OkStatus();
  }

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
  absl::StatusOr<ShellScript> RunAll(const std::vector<Token>& tokens) {
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
      return Error(last_line_, absl::StrCat("a '", skip_opener_, "' block without its ", skip_until_));
    }
    if (!blocks_.empty()) return Error(last_line_, "an if block without its fi");
    script_.variables = vars_;
    return std::move(script_);
  }
};

}  // namespace

absl::StatusOr<ShellScript> ReadShell(absl::string_view text, absl::string_view name) {
  if (static_cast<int64_t>(text.size()) > kMaxShellBytes) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", text.size(),
                                                   " bytes; a launch script is at most ",
                                                   kMaxShellBytes, " bytes"));
  }
  if (text.find('\0') != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": holds a NUL byte; a launch script is text"));
  }
  Lexer lexer(text, name);
  absl::StatusOr<std::vector<Token>> tokens = lexer.Tokens();
  if (!tokens.ok()) return tokens.status();
  Interpreter interpreter(name);
  return interpreter.RunAll(*tokens);
}

}  // namespace vtrain::proto
