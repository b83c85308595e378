// The expansion of words by the static bash reader (proto/shell_interpreter.h):
// parameters, arrays, arithmetic, quoting and splitting, as bash does them;
// command substitutions are reported, never run.
#include <cctype>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/shell_interpreter.h"

namespace vtrain::proto::internal {

absl::Status Interpreter::AssignArray(const Token& t) {
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

absl::StatusOr<std::string> Interpreter::Parameter(absl::string_view body, int line,
                                                   bool* is_array_all,
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
    if (!absl::SimpleAtoi(index, &n))
      return Error(line, absl::StrCat("${", body, "}: an index must be a number"));
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
    absl::StatusOr<std::vector<Token>> tokens = internal::LexShell(word, name_);
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

absl::StatusOr<std::string> Interpreter::ExpandText(absl::string_view text, int line,
                                                    bool* array_all,
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
        absl::StatusOr<int64_t> v = internal::EvalArithmetic(*expanded, vars_);
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

absl::Status Interpreter::Expand(const Word& word, int line, std::vector<std::string>& fields) {
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

}  // namespace vtrain::proto::internal
