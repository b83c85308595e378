#include "proto/shell_lexer.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace vtrain::proto::internal {

bool IsShellName(absl::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

namespace {

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
            IsShellName(w.substr(0, w.size() - (append ? 2 : 1)))) {
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
      while (i_ < s_.size() &&
             (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_' ||
              (out == "$" && (s_[i_] == '@' || s_[i_] == '#' || s_[i_] == '?' || s_[i_] == '*')))) {
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
      if (i_ == before)
        return Error(absl::StrCat("unexpected '", s_.substr(i_, 1), "' in an array"));
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
      if (op == '*' && *v != 0 &&
          std::abs(*r) > (int64_t{1} << 40) / std::max<int64_t>(1, std::abs(*v))) {
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
      if (i_ >= e_.size() || e_[i_] != ')')
        return absl::InvalidArgumentError("an unclosed ( in $((...))");
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
    while (i_ < e_.size() && (std::isalnum(static_cast<unsigned char>(e_[i_])) || e_[i_] == '_'))
      ++i_;
    absl::string_view token = e_.substr(start, i_ - start);
    if (token.empty())
      return absl::InvalidArgumentError(absl::StrCat("cannot evaluate $((", e_, "))"));
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

}  // namespace

absl::StatusOr<std::vector<Token>> LexShell(absl::string_view text, absl::string_view name) {
  Lexer lexer(text, name);
  return lexer.Tokens();
}

absl::StatusOr<int64_t> EvalArithmetic(absl::string_view expression,
                                       const std::map<std::string, std::string>& vars) {
  return Arithmetic(expression, vars).Value();
}

}  // namespace vtrain::proto::internal
