// One table per enum of names users type and read: the name of a value, the
// value of a name, and the error that lists the names (Schedule, Recompute,
// DType, ...). Each enum's Name/Parse pair is a one-line use of its table.
#ifndef VTRAIN_CORE_UTIL_ENUM_NAMES_H_
#define VTRAIN_CORE_UTIL_ENUM_NAMES_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace vtrain {

// One name of an enum value. A value may have several names (aliases that
// parse to it); the first one is the name it prints as.
template <typename E>
struct EnumName {
  E value;
  absl::string_view name;
};

// The name `value` prints as: its first entry in `table`; "unknown" if none.
template <typename E, size_t N>
constexpr absl::string_view NameIn(const EnumName<E> (&table)[N], E value) {
  for (const EnumName<E>& e : table) {
    if (e.value == value) return e.name;
  }
  return "unknown";
}

// Every name in `table`, as "a, b or c".
template <typename E, size_t N>
std::string NamesIn(const EnumName<E> (&table)[N]) {
  std::string out;
  for (size_t i = 0; i < N; ++i) {
    absl::StrAppend(&out, i == 0 ? "" : i + 1 == N ? " or " : ", ", table[i].name);
  }
  return out;
}

// The value named `name`, or INVALID_ARGUMENT "<field>='<name>' is unknown;
// use a, b or c".
template <typename E, size_t N>
absl::StatusOr<E> ParseIn(const EnumName<E> (&table)[N], absl::string_view name,
                          absl::string_view field) {
  for (const EnumName<E>& e : table) {
    if (e.name == name) return e.value;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(field, "='", name, "' is unknown; use ", NamesIn(table)));
}

}  // namespace vtrain

#endif  // VTRAIN_CORE_UTIL_ENUM_NAMES_H_
