// Hash and equality for hash maps keyed by tuples or pairs of strings and
// looked up by the same tuples of string_views (absl's heterogeneous
// lookup): finding an existing key copies no string.
#ifndef VTRAIN_SERVER_VIEW_KEY_H_
#define VTRAIN_SERVER_VIEW_KEY_H_

#include <cstddef>

#include "absl/hash/hash.h"

namespace vtrain::server {

// `View`: the key type with absl::string_view in place of std::string; keys
// convert to it (std::string converts to absl::string_view, and so do
// pairs and tuples of them), and both hash as the view.
template <typename View>
struct ViewHash {
  using is_transparent = void;
  size_t operator()(const View& v) const { return absl::Hash<View>{}(v); }
};
template <typename View>
struct ViewEq {
  using is_transparent = void;
  bool operator()(const View& a, const View& b) const { return a == b; }
};

}  // namespace vtrain::server

#endif  // VTRAIN_SERVER_VIEW_KEY_H_
