#include "proto/yaml_reader.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "proto/yaml_scalars.h"

namespace vtrain::proto {

const YamlNode* YamlNode::Find(absl::string_view key) const {
  if (kind != Kind::kMap) return nullptr;
  for (const auto& [k, v] : map) {
    if (k == key) return v.get();
  }
  return nullptr;
}

namespace {

using internal::IsNullText;
using internal::QuoteEnd;
using internal::StripComment;
using internal::Unquote;
using NodePtr = std::shared_ptr<const YamlNode>;

struct Line {
  int number = 0;
  int indent = 0;
  std::string raw;      // the whole line, for block scalars
  std::string content;  // after the indentation, comment and trailing blanks removed
};

class Parser {
 public:
  Parser(absl::string_view name, const YamlLimits& limits) : name_(name), limits_(limits) {}

  absl::StatusOr<NodePtr> Document(absl::string_view text);

 private:
  absl::Status Error(int line, absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(name_, ":", line, ": ", what));
  }
  const Line* Current() {
    while (pos_ < lines_.size() && lines_[pos_].content.empty()) ++pos_;
    return pos_ < lines_.size() ? &lines_[pos_] : nullptr;
  }
  absl::StatusOr<NodePtr> Node(int indent, int depth);
  absl::StatusOr<NodePtr> Mapping(int indent, int depth);
  absl::StatusOr<NodePtr> Sequence(int indent, int depth);
  absl::StatusOr<NodePtr> Value(std::string rest, int parent, int depth, int line, bool same_seq);
  absl::StatusOr<NodePtr> BlockScalar(absl::string_view header, int parent, int line);
  absl::StatusOr<NodePtr> Flow(absl::string_view s, size_t& i, int depth, int line,
                               absl::string_view stops);
  absl::StatusOr<NodePtr> Scalar(std::string text, bool quoted, int line, absl::string_view tag);
  absl::StatusOr<NodePtr> Finish(std::shared_ptr<YamlNode> n, int line);
  absl::Status Merge(const YamlNode& from, YamlNode& into, int line) const;

  absl::string_view name_;
  YamlLimits limits_;
  std::vector<Line> lines_;
  size_t pos_ = 0;
  std::map<std::string, NodePtr> anchors_;
};

// Where a line's mapping key ends (the ':' after it), or npos for a line that
// is not "key: ..." .
size_t KeyColon(absl::string_view c) {
  if (c.empty() || absl::string_view("[{|>*!&-").find(c[0]) != absl::string_view::npos) {
    if (!(c[0] == '-' && c.size() > 1 && c[1] != ' ')) return absl::string_view::npos;
  }
  size_t i = 0;
  if (c[0] == '"' || c[0] == '\'') {
    i = QuoteEnd(c, 0);
    if (i == absl::string_view::npos) return i;
    ++i;
    return i < c.size() && c[i] == ':' && (i + 1 == c.size() || c[i + 1] == ' ')
               ? i
               : absl::string_view::npos;
  }
  for (; i < c.size(); ++i) {
    if (c[i] == ':' && (i + 1 == c.size() || c[i + 1] == ' ')) return i;
  }
  return absl::string_view::npos;
}

bool IsSeqItem(absl::string_view c) { return c == "-" || absl::StartsWith(c, "- "); }

absl::StatusOr<NodePtr> Parser::Document(absl::string_view text) {
  if (text.size() > limits_.max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(name_, ": ", text.size(), " bytes, over the ",
                                                   limits_.max_bytes, "-byte limit for a config"));
  }
  int number = 0;
  bool started = false, body = false;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++number;
    if (absl::EndsWith(raw, "\r")) raw.remove_suffix(1);
    Line l;
    l.number = number;
    l.raw = std::string(raw);
    size_t indent = raw.find_first_not_of(' ');
    if (indent == absl::string_view::npos) indent = raw.size();
    if (indent < raw.size() && raw[indent] == '\t') {
      return Error(number, "a tab in the indentation (YAML indents with spaces)");
    }
    l.indent = static_cast<int>(indent);
    absl::StatusOr<std::string> content = StripComment(raw.substr(indent));
    if (!content.ok()) return Error(number, content.status().message());
    l.content = *content;
    if (l.indent == 0 && absl::StartsWith(l.content, "%")) continue;  // a directive
    if (l.indent == 0 && (l.content == "---" || absl::StartsWith(l.content, "--- "))) {
      if (started || body) return Error(number, "a second document (one document per config)");
      started = true;
      l.content = std::string(absl::StripAsciiWhitespace(l.content.substr(3)));
    }
    if (l.indent == 0 && l.content == "...") break;
    if (!l.content.empty()) body = true;
    lines_.push_back(std::move(l));
  }
  const Line* first = Current();
  if (first == nullptr) return Finish(std::make_shared<YamlNode>(), 1);
  absl::StatusOr<NodePtr> root = Node(first->indent, 0);
  if (!root.ok()) return root;
  if (const Line* extra = Current()) {
    return Error(extra->number, "indentation that does not continue the block above it");
  }
  return root;
}

absl::StatusOr<NodePtr> Parser::Node(int indent, int depth) {
  const Line& l = *Current();
  if (depth > limits_.max_depth) {
    return Error(l.number, absl::StrCat("nested deeper than ", limits_.max_depth, " levels"));
  }
  if (IsSeqItem(l.content)) return Sequence(l.indent, depth);
  if (KeyColon(l.content) != absl::string_view::npos) return Mapping(l.indent, depth);
  if (absl::StartsWith(l.content, "? ")) return Error(l.number, "complex keys ('? ') are not read");
  ++pos_;
  return Value(l.content, indent - 1, depth, l.number, false);
}

absl::StatusOr<NodePtr> Parser::Mapping(int indent, int depth) {
  auto n = std::make_shared<YamlNode>();
  n->kind = YamlNode::Kind::kMap;
  n->line = Current()->number;
  std::vector<NodePtr> merges;
  while (const Line* l = Current()) {
    if (l->indent < indent) break;
    if (l->indent > indent) return Error(l->number, "more indented than the keys above it");
    if (IsSeqItem(l->content)) break;
    const size_t colon = KeyColon(l->content);
    if (colon == absl::string_view::npos) {
      return Error(l->number, absl::StrCat("'", l->content, "' is not 'key: value'"));
    }
    std::string key = l->content.substr(0, colon);
    if (!key.empty() && (key[0] == '"' || key[0] == '\'')) {
      absl::StatusOr<std::string> k = Unquote(key, 0, key.size() - 1);
      if (!k.ok()) return Error(l->number, k.status().message());
      key = *k;
    }
    const int line = l->number;
    std::string rest(absl::StripAsciiWhitespace(l->content.substr(colon + 1)));
    ++pos_;
    absl::StatusOr<NodePtr> v = Value(std::move(rest), indent, depth + 1, line, true);
    if (!v.ok()) return v;
    if (key == "<<") {
      merges.push_back(*v);
      continue;
    }
    if (n->Find(key) != nullptr) return Error(line, absl::StrCat("key '", key, "' given twice"));
    n->map.emplace_back(std::move(key), *v);
  }
  for (const NodePtr& m : merges) {
    if (absl::Status s = Merge(*m, *n, n->line); !s.ok()) return s;
  }
  return Finish(n, n->line);
}

absl::Status Parser::Merge(const YamlNode& from, YamlNode& into, int line) const {
  if (from.kind == YamlNode::Kind::kSeq) {
    for (const NodePtr& m : from.seq) {
      if (absl::Status s = Merge(*m, into, line); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  if (from.kind != YamlNode::Kind::kMap) return Error(line, "'<<' merges only mappings");
  for (const auto& [k, v] : from.map) {
    if (into.Find(k) == nullptr) into.map.emplace_back(k, v);
  }
  return absl::OkStatus();
}

absl::StatusOr<NodePtr> Parser::Sequence(int indent, int depth) {
  auto n = std::make_shared<YamlNode>();
  n->kind = YamlNode::Kind::kSeq;
  n->line = Current()->number;
  while (Line* l = const_cast<Line*>(Current())) {
    if (l->indent != indent || !IsSeqItem(l->content)) {
      if (l->indent > indent) return Error(l->number, "more indented than the items above it");
      break;
    }
    const size_t skip = l->content.find_first_not_of(' ', 1);
    std::string rest = skip == std::string::npos ? "" : l->content.substr(skip);
    absl::StatusOr<NodePtr> item;
    if (!rest.empty() && (IsSeqItem(rest) || KeyColon(rest) != absl::string_view::npos)) {
      // "- key: value" or "- - x": the item is a block starting in this line.
      l->indent += static_cast<int>(skip);
      l->content = rest;
      item = Node(l->indent, depth + 1);
    } else {
      ++pos_;
      item = Value(rest, indent, depth + 1, l->number, false);
    }
    if (!item.ok()) return item;
    n->seq.push_back(*item);
  }
  return Finish(n, n->line);
}

// A node's value after "key:" or "- ": properties (&anchor, !!tag), then an
// alias, a block scalar, a flow collection, a quoted or plain scalar, or
// (nothing on the line) the block below it. `parent` is the indentation of
// the key or dash; `same_seq`: a sequence may sit at the key's indentation.
absl::StatusOr<NodePtr> Parser::Value(std::string rest, int parent, int depth, int line,
                                      bool same_seq) {
  std::string anchor, tag;
  while (!rest.empty() && (rest[0] == '&' || rest[0] == '!')) {
    const size_t end = std::min(rest.find(' '), rest.size());
    std::string& into = rest[0] == '&' ? anchor : tag;
    into = rest.substr(rest[0] == '&' ? 1 : 0, end - (rest[0] == '&' ? 1 : 0));
    rest = std::string(absl::StripLeadingAsciiWhitespace(rest.substr(end)));
  }
  static constexpr absl::string_view kTags[] = {"!!str",  "!!int", "!!float", "!!bool",
                                                "!!null", "!!map", "!!seq"};
  if (!tag.empty() && std::find(std::begin(kTags), std::end(kTags), tag) == std::end(kTags)) {
    return Error(line, absl::StrCat("the tag '", tag,
                                    "' is not read: a config is plain data, it names no types"));
  }
  absl::StatusOr<NodePtr> v;
  if (!rest.empty() && rest[0] == '*') {
    auto it = anchors_.find(rest.substr(1));
    if (it == anchors_.end()) return Error(line, absl::StrCat("alias '", rest, "' has no anchor"));
    v = it->second;
  } else if (!rest.empty() && (rest[0] == '|' || rest[0] == '>')) {
    v = BlockScalar(rest, parent, line);
  } else if (!rest.empty() && (rest[0] == '[' || rest[0] == '{')) {
    // A flow collection may go on over more-indented lines.
    std::string text = rest;
    for (const Line* l = Current(); l != nullptr && l->indent > parent; l = Current()) {
      absl::StrAppend(&text, " ", l->content);
      ++pos_;
    }
    size_t i = 0;
    v = Flow(text, i, depth, line, "");
    if (v.ok() && text.find_first_not_of(' ', i) != std::string::npos) {
      return Error(line, absl::StrCat("'", text.substr(i), "' after a closed flow collection"));
    }
  } else if (!rest.empty() && (rest[0] == '"' || rest[0] == '\'')) {
    const size_t end = QuoteEnd(rest, 0);
    if (end + 1 != rest.size()) return Error(line, "text after a quoted scalar");
    absl::StatusOr<std::string> t = Unquote(rest, 0, end);
    if (!t.ok()) return Error(line, t.status().message());
    v = Scalar(*t, true, line, tag);
  } else if (!rest.empty()) {
    // A plain scalar may be folded over more-indented lines.
    for (const Line* l = Current(); l != nullptr && l->indent > parent; l = Current()) {
      absl::StrAppend(&rest, " ", l->content);
      ++pos_;
    }
    v = Scalar(rest, false, line, tag);
  } else if (const Line* next = Current();
             next != nullptr && (next->indent > parent || (same_seq && next->indent == parent &&
                                                           IsSeqItem(next->content)))) {
    v = Node(next->indent, depth);
  } else {
    v = Scalar("", false, line, tag);
  }
  if (v.ok() && !anchor.empty()) anchors_[anchor] = *v;
  return v;
}

absl::StatusOr<NodePtr> Parser::BlockScalar(absl::string_view header, int parent, int line) {
  const bool folded = header[0] == '>';
  const bool strip = absl::StrContains(header, '-'), keep = absl::StrContains(header, '+');
  std::vector<std::string> body;
  int indent = -1;
  for (; pos_ < lines_.size(); ++pos_) {
    const Line& l = lines_[pos_];
    const bool blank = l.raw.find_first_not_of(' ') == std::string::npos;
    if (!blank && l.indent <= parent) break;
    if (!blank && indent < 0) indent = l.indent;
    if (!blank && l.indent < indent) break;
    body.push_back(blank ? "" : l.raw.substr(static_cast<size_t>(indent)));
  }
  size_t trailing = 0;
  while (trailing < body.size() && body[body.size() - 1 - trailing].empty()) ++trailing;
  body.resize(body.size() - trailing);
  std::string text = absl::StrJoin(body, folded ? " " : "\n");
  if (!strip && !body.empty()) text += keep ? std::string(trailing + 1, '\n') : "\n";
  return Scalar(std::move(text), true, line, "");
}

// A flow collection or scalar at s[i]; a plain scalar ends at one of
// `stops` (and ',', ']', '}').
absl::StatusOr<NodePtr> Parser::Flow(absl::string_view s, size_t& i, int depth, int line,
                                     absl::string_view stops) {
  if (depth > limits_.max_depth) {
    return Error(line, absl::StrCat("nested deeper than ", limits_.max_depth, " levels"));
  }
  auto skip = [&] {
    while (i < s.size() && s[i] == ' ') ++i;
  };
  skip();
  if (i >= s.size()) return Error(line, "a flow collection that does not close");
  if (s[i] == '[' || s[i] == '{') {
    const bool is_map = s[i] == '{';
    const char close = is_map ? '}' : ']';
    auto n = std::make_shared<YamlNode>();
    n->kind = is_map ? YamlNode::Kind::kMap : YamlNode::Kind::kSeq;
    n->line = line;
    ++i;
    for (skip(); i < s.size() && s[i] != close; skip()) {
      absl::StatusOr<NodePtr> key = Flow(s, i, depth + 1, line, is_map ? ":" : "");
      if (!key.ok()) return key;
      skip();
      if (is_map) {
        if (i >= s.size() || s[i] != ':') return Error(line, "a flow mapping entry without ':'");
        ++i;
        absl::StatusOr<NodePtr> value = Flow(s, i, depth + 1, line, "");
        if (!value.ok()) return value;
        if ((*key)->kind != YamlNode::Kind::kScalar) return Error(line, "a key that is not text");
        if (n->Find((*key)->text) != nullptr) {
          return Error(line, absl::StrCat("key '", (*key)->text, "' given twice"));
        }
        n->map.emplace_back((*key)->text, *value);
      } else {
        n->seq.push_back(*key);
      }
      skip();
      if (i < s.size() && s[i] == ',') {
        ++i;
      } else if (i < s.size() && s[i] != close) {
        return Error(line, absl::StrCat("'", std::string(1, s[i]), "' where ',' or '",
                                        std::string(1, close), "' belongs in a flow collection"));
      }
    }
    if (i >= s.size()) return Error(line, "a flow collection that does not close");
    ++i;
    return Finish(n, line);
  }
  if (s[i] == '"' || s[i] == '\'') {
    const size_t end = QuoteEnd(s, i);
    if (end == absl::string_view::npos) return Error(line, "a quote that does not close");
    absl::StatusOr<std::string> t = Unquote(s, i, end);
    if (!t.ok()) return Error(line, t.status().message());
    i = end + 1;
    return Scalar(*t, true, line, "");
  }
  if (s[i] == '*') {
    size_t end = s.find_first_of(",]} ", i);
    if (end == absl::string_view::npos) end = s.size();
    auto it = anchors_.find(std::string(s.substr(i + 1, end - i - 1)));
    if (it == anchors_.end()) return Error(line, "an alias with no anchor");
    i = end;
    return it->second;
  }
  const size_t start = i;
  while (i < s.size() && s[i] != ',' && s[i] != ']' && s[i] != '}' &&
         stops.find(s[i]) == absl::string_view::npos) {
    ++i;
  }
  return Scalar(std::string(absl::StripTrailingAsciiWhitespace(s.substr(start, i - start))), false,
                line, "");
}

absl::StatusOr<NodePtr> Parser::Scalar(std::string text, bool quoted, int line,
                                       absl::string_view tag) {
  auto n = std::make_shared<YamlNode>();
  n->line = line;
  quoted = quoted || tag == "!!str";
  if (!quoted && IsNullText(text)) return Finish(n, line);
  n->kind = YamlNode::Kind::kScalar;
  n->text = std::move(text);
  n->quoted = quoted;
  return Finish(n, line);
}

absl::StatusOr<NodePtr> Parser::Finish(std::shared_ptr<YamlNode> n, int line) {
  int64_t total = 1;
  auto add = [&](const NodePtr& c) {
    total = std::min(total + c->expanded, limits_.max_expanded_nodes + 1);
  };
  for (const auto& [k, v] : n->map) add(v);
  for (const NodePtr& c : n->seq) add(c);
  n->expanded = total;
  if (total > limits_.max_expanded_nodes) {
    return Error(line, absl::StrCat("expands (through its aliases) to more than ",
                                    limits_.max_expanded_nodes, " nodes"));
  }
  return NodePtr(std::move(n));
}

}  // namespace

absl::StatusOr<std::shared_ptr<const YamlNode>> ReadYaml(absl::string_view text,
                                                         absl::string_view name,
                                                         const YamlLimits& limits) {
  Parser p(name, limits);
  return p.Document(text);
}

}  // namespace vtrain::proto
