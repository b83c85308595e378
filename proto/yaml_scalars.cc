#include "proto/yaml_scalars.h"

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace vtrain::proto::internal {

// The end of a quoted scalar starting at s[i] (the index of its closing
// quote), or npos when it does not close on this line.
size_t QuoteEnd(absl::string_view s, size_t i) {
  const char q = s[i];
  for (size_t j = i + 1; j < s.size(); ++j) {
    if (q == '"' && s[j] == '\\') {
      ++j;
    } else if (s[j] == q) {
      if (q == '\'' && j + 1 < s.size() && s[j + 1] == '\'') {
        ++j;
      } else {
        return j;
      }
    }
  }
  return absl::string_view::npos;
}

// The line without its comment: '#' at the start or after a blank, outside
// quotes. A quote opened where a scalar may start must close on the line.
absl::StatusOr<std::string> StripComment(absl::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    const bool token_start = i == 0 || s[i - 1] == ' ' || s[i - 1] == '[' || s[i - 1] == '{' ||
                             s[i - 1] == ',' || s[i - 1] == '-' || s[i - 1] == ':';
    if ((s[i] == '"' || s[i] == '\'') && token_start) {
      const size_t end = QuoteEnd(s, i);
      if (end == absl::string_view::npos) {
        return absl::InvalidArgumentError(
            "a quoted scalar that does not close on its line (write it on one line)");
      }
      i = end;
    } else if (s[i] == '#' && (i == 0 || s[i - 1] == ' ')) {
      s = s.substr(0, i);
      break;
    }
  }
  return std::string(absl::StripTrailingAsciiWhitespace(s));
}

bool IsNullText(absl::string_view t) {
  return t.empty() || t == "~" || t == "null" || t == "Null" || t == "NULL";
}

namespace {

void AppendUtf8(uint32_t c, std::string& out) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

}  // namespace

// The value of the quoted scalar s[i..end].
absl::StatusOr<std::string> Unquote(absl::string_view s, size_t i, size_t end) {
  std::string out;
  for (size_t j = i + 1; j < end; ++j) {
    if (s[i] == '\'') {
      out += s[j];
      if (s[j] == '\'') ++j;
      continue;
    }
    if (s[j] != '\\') {
      out += s[j];
      continue;
    }
    const char e = s[++j];
    const size_t hex = e == 'x' ? 2 : e == 'u' ? 4 : 0;
    if (hex > 0) {
      uint32_t c = 0;
      if (j + hex >= end || !absl::SimpleHexAtoi(s.substr(j + 1, hex), &c)) {
        return absl::InvalidArgumentError(absl::StrCat("a bad \\", std::string(1, e), " escape"));
      }
      AppendUtf8(c, out);
      j += hex;
      continue;
    }
    static constexpr absl::string_view kFrom = "\\\"/nt0 ", kTo = "\\\"/\n\t\0 ";
    const size_t k = kFrom.find(e);
    if (k == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("an unknown escape \\", std::string(1, e)));
    }
    out += kTo[k];
  }
  return out;
}

}  // namespace vtrain::proto::internal
