// A bounded reader for the safe subset of YAML that configuration dumps use
// (PyYAML's safe_dump, as Megatron-Bridge's ConfigContainer.to_yaml writes
// it, and the same written by hand): block mappings and sequences, flow
// [..] and {..}, plain, quoted and block (| >) scalars, comments, anchors
// and aliases (also `<<:` merges). Tags other than the core schema's
// (!!str, !!int, ...) are refused, so nothing names a type to construct.
// Bounded: the text's size, the nesting depth and the size a node would have
// with every alias expanded (aliases are shared, never copied, so a
// "billion laughs" document is refused by its expanded size, not built).
#ifndef VTRAIN_PROTO_YAML_READER_H_
#define VTRAIN_PROTO_YAML_READER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace vtrain::proto {

struct YamlNode {
  enum class Kind { kNull, kScalar, kMap, kSeq };
  Kind kind = Kind::kNull;
  std::string text;     // a scalar's value (quotes removed, escapes read)
  bool quoted = false;  // a quoted scalar is always a string
  int line = 0;         // 1-based line where the node starts
  std::vector<std::pair<std::string, std::shared_ptr<const YamlNode>>> map;  // in order
  std::vector<std::shared_ptr<const YamlNode>> seq;
  int64_t expanded = 1;  // nodes with every alias expanded (saturates)

  // The value of `key` in a mapping; nullptr when absent or not a mapping.
  const YamlNode* Find(absl::string_view key) const;
  bool IsNull() const { return kind == Kind::kNull; }
};

struct YamlLimits {
  size_t max_bytes = 4 << 20;
  int max_depth = 64;
  int64_t max_expanded_nodes = 1'000'000;
};

// Parses one document. INVALID_ARGUMENT naming `name` and the line for
// malformed text, unsupported syntax (tags, several documents, tabs in
// indentation, complex keys), duplicate keys, undefined aliases and
// anything over `limits`.
absl::StatusOr<std::shared_ptr<const YamlNode>> ReadYaml(absl::string_view text,
                                                         absl::string_view name,
                                                         const YamlLimits& limits = {});

}  // namespace vtrain::proto

#endif  // VTRAIN_PROTO_YAML_READER_H_
