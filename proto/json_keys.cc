#include "proto/json_keys.h"

#include <cctype>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace vtrain::proto {
namespace {

constexpr int kMaxDepth = 100;

// The field a key names in protobuf's JSON mapping: lowerCamelCase and
// snake_case spellings of one field compare equal.
std::string Canonical(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c != '_') out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return out;
}

// One pass over the text; strings are skipped with their escapes.
class Scanner {
 public:
  explicit Scanner(std::string_view text) : text_(text) {}

  absl::Status Run() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '"') {
        std::string s;
        if (!ReadString(&s)) return absl::OkStatus();  // malformed: the parser says why
        if (IsKey() && !frames_.empty() && frames_.back().is_object) {
          Frame& f = frames_.back();
          f.last_key = s;
          if (!f.keys.insert(Canonical(s)).second) {
            return absl::InvalidArgumentError(
                absl::StrCat("the key '", Path(s), "' appears twice in one object; keep one"));
          }
        }
        continue;
      }
      if (c == '{' || c == '[') {
        if (frames_.size() >= kMaxDepth) {
          return absl::InvalidArgumentError(
              absl::StrCat("JSON nested deeper than ", kMaxDepth, " levels"));
        }
        frames_.push_back(Frame{c == '{', {}, ""});
      } else if ((c == '}' || c == ']') && !frames_.empty()) {
        frames_.pop_back();
      }
      ++pos_;
    }
    return absl::OkStatus();
  }

 private:
  struct Frame {
    bool is_object;
    absl::flat_hash_set<std::string> keys;
    std::string last_key;  // the key whose value is being read
  };

  // Reads a string starting at pos_ (a quote) into `out` (escapes kept as
  // written); false when it does not end.
  bool ReadString(std::string* out) {
    ++pos_;
    while (pos_ < text_.size()) {
      const char c = text_[pos_++];
      if (c == '"') return true;
      if (c == '\\') {
        if (pos_ >= text_.size()) return false;
        out->push_back(c);
        out->push_back(text_[pos_++]);
        continue;
      }
      out->push_back(c);
    }
    return false;
  }

  // A string is a key when the next non-space character is a colon.
  bool IsKey() const {
    for (size_t i = pos_; i < text_.size(); ++i) {
      if (std::isspace(static_cast<unsigned char>(text_[i]))) continue;
      return text_[i] == ':';
    }
    return false;
  }

  // "plan.global_batch": the enclosing objects' keys, then `key`.
  std::string Path(const std::string& key) const {
    std::vector<std::string> parts;
    for (size_t i = 0; i + 1 < frames_.size(); ++i) {
      if (frames_[i].is_object && !frames_[i].last_key.empty()) {
        parts.push_back(frames_[i].last_key);
      }
    }
    parts.push_back(key);
    return absl::StrJoin(parts, ".");
  }

  std::string_view text_;
  size_t pos_ = 0;
  std::vector<Frame> frames_;
};

}  // namespace

absl::Status CheckNoDuplicateKeys(std::string_view json) { return Scanner(json).Run(); }

}  // namespace vtrain::proto
