#include "core/spec/topology.h"

#include <algorithm>
#include <cstddef>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/util/status_macros.h"

namespace vtrain {
namespace {

// Splits at commas outside brackets: "a[1-2,5],b" -> "a[1-2,5]", "b".
absl::StatusOr<std::vector<absl::string_view>> TopLevelItems(absl::string_view list) {
  std::vector<absl::string_view> items;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    const char c = i < list.size() ? list[i] : ',';
    if (c == '[') ++depth;
    if (c == ']' && --depth < 0) break;
    if (depth > 1) break;
    if (c == ',' && depth == 0) {
      if (i > start) items.push_back(list.substr(start, i - start));
      start = i + 1;
    }
  }
  if (depth != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("hostlist '", list, "' has unbalanced or nested brackets"));
  }
  return items;
}

// One range of a bracket, "001-004": its ends and the zero-padded width.
struct Range {
  int64_t first = 0, last = 0;
  size_t width = 0;
};

// The ranges of one bracket's contents, "001-004,010", and how many numbers
// they hold.
absl::StatusOr<std::vector<Range>> BracketRanges(absl::string_view inside, absl::string_view item,
                                                 int64_t& count) {
  std::vector<Range> out;
  count = 0;
  for (absl::string_view part : absl::StrSplit(inside, ',')) {
    const std::vector<absl::string_view> ends = absl::StrSplit(part, absl::MaxSplits('-', 1));
    Range r;
    if (ends[0].empty() || !absl::SimpleAtoi(ends[0], &r.first) ||
        !absl::SimpleAtoi(ends.size() > 1 ? ends[1] : ends[0], &r.last) || r.first < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("hostlist item '", item, "' has '", part, "', not a number or range"));
    }
    if (r.last < r.first) {
      return absl::InvalidArgumentError(
          absl::StrCat("hostlist item '", item, "' has the descending range '", part, "'"));
    }
    count += std::min(r.last - r.first + 1, kMaxTopologyNodes + 1);
    count = std::min(count, kMaxTopologyNodes + 1);
    r.width = ends[0].size();
    out.push_back(r);
  }
  return out;
}

// Appends the names of one item, "rack[1-2]n[01-02]", to `names`.
absl::Status ExpandItem(absl::string_view item, std::vector<std::string>& names) {
  // Count first: nothing is built for a list that is too long.
  std::vector<std::pair<std::string, std::vector<Range>>> pieces;
  double total = 1;
  size_t i = 0;
  while (i < item.size()) {
    const size_t open = item.find('[', i);
    const size_t end = open == absl::string_view::npos ? item.size() : open;
    pieces.emplace_back(std::string(item.substr(i, end - i)), std::vector<Range>());
    if (open == absl::string_view::npos) break;
    const size_t close = item.find(']', open);
    int64_t count = 0;
    VTRAIN_ASSIGN_OR_RETURN(pieces.back().second,
                            BracketRanges(item.substr(open + 1, close - open - 1), item, count));
    total *= static_cast<double>(count);
    i = close + 1;
  }
  if (total + static_cast<double>(names.size()) > static_cast<double>(kMaxTopologyNodes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("hostlist item '", item, "' names more than ", kMaxTopologyNodes, " hosts"));
  }
  std::vector<std::string> partial = {""};
  for (const auto& [text, ranges] : pieces) {
    for (std::string& p : partial) absl::StrAppend(&p, text);
    if (ranges.empty()) continue;
    std::vector<std::string> next;
    for (const std::string& p : partial) {
      for (const Range& r : ranges) {
        for (int64_t n = r.first; n <= r.last; ++n) {
          std::string digits = absl::StrCat(n);
          if (digits.size() < r.width) digits.insert(0, r.width - digits.size(), '0');
          next.push_back(absl::StrCat(p, digits));
        }
      }
    }
    partial = std::move(next);
  }
  for (std::string& p : partial) names.push_back(std::move(p));
  return absl::OkStatus();
}

struct SwitchLine {
  std::string name;
  std::vector<std::string> nodes, switches;
  bool has_nodes = false, has_switches = false;
  int line = 0;
};

absl::StatusOr<SwitchLine> ParseLine(absl::string_view line, int number, absl::string_view source) {
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(source, ":", number, ": ", why));
  };
  SwitchLine s;
  s.line = number;
  for (absl::string_view field : absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty())) {
    const size_t eq = field.find('=');
    if (eq == absl::string_view::npos) {
      return bad(absl::StrCat("'", field, "' is not KEY=VALUE"));
    }
    const std::string key = absl::AsciiStrToLower(field.substr(0, eq));
    const absl::string_view value = field.substr(eq + 1);
    if (key == "switchname") {
      s.name = std::string(value);
    } else if (key == "nodes" || key == "switches") {
      absl::StatusOr<std::vector<std::string>> names = ExpandHostlist(value);
      if (!names.ok()) return bad(names.status().message());
      (key == "nodes" ? s.has_nodes : s.has_switches) = true;
      (key == "nodes" ? s.nodes : s.switches) = *std::move(names);
    } else if (key != "linkspeed") {
      return bad(absl::StrCat("unknown key '", field.substr(0, eq),
                              "'; a tree topology line has SwitchName=, Nodes= or Switches= "
                              "(and LinkSpeed=, ignored)"));
    }
  }
  if (s.name.empty()) return bad("a switch line needs SwitchName=");
  if (s.has_nodes == s.has_switches) {
    return bad(absl::StrCat("switch '", s.name,
                            "' needs Nodes= (a leaf) or Switches= (a spine), one of the two"));
  }
  return s;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ExpandHostlist(absl::string_view hostlist) {
  VTRAIN_ASSIGN_OR_RETURN(std::vector<absl::string_view> items, TopLevelItems(hostlist));
  std::vector<std::string> names;
  for (absl::string_view item : items) {
    absl::Status s = ExpandItem(item, names);
    if (!s.ok()) return s;
  }
  if (names.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("hostlist '", hostlist, "' names no host"));
  }
  return names;
}

absl::StatusOr<SlurmTopology> ParseSlurmTopology(absl::string_view text, absl::string_view source) {
  std::vector<SwitchLine> switches;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    line = line.substr(0, line.find('#'));
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    VTRAIN_ASSIGN_OR_RETURN(SwitchLine s, ParseLine(line, number, source));
    switches.push_back(std::move(s));
  }
  absl::flat_hash_map<std::string, const SwitchLine*> by_name;
  absl::flat_hash_set<std::string> hosts;
  SlurmTopology t;
  const SwitchLine* first_leaf = nullptr;
  for (const SwitchLine& s : switches) {
    const auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat(source, ":", s.line, ": ", why));
    };
    if (!by_name.emplace(s.name, &s).second) {
      return bad(absl::StrCat("switch '", s.name, "' is named twice"));
    }
    if (!s.has_nodes) continue;
    if (first_leaf == nullptr) first_leaf = &s;
    if (s.nodes.size() != first_leaf->nodes.size()) {
      return bad(absl::StrCat("leaf '", s.name, "' has ", s.nodes.size(), " nodes but leaf '",
                              first_leaf->name, "' (line ", first_leaf->line, ") has ",
                              first_leaf->nodes.size(),
                              "; vtrain's leaf/spine fabric has leaves of one size"));
    }
    for (const std::string& host : s.nodes) {
      if (!hosts.insert(host).second) {
        return bad(absl::StrCat("node '", host, "' is under two leaves"));
      }
      t.node_names.push_back(host);
    }
    if (static_cast<int64_t>(t.node_names.size()) > kMaxTopologyNodes) {
      return bad(absl::StrCat("the topology names more than ", kMaxTopologyNodes, " nodes"));
    }
    ++t.leaves;
  }
  if (first_leaf == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": no leaf switch (a SwitchName= line with Nodes=)"));
  }
  for (const SwitchLine& s : switches) {
    for (const std::string& child : s.switches) {
      const auto it = by_name.find(child);
      if (it == by_name.end() || !it->second->has_nodes) {
        return absl::InvalidArgumentError(absl::StrCat(
            source, ":", s.line, ": switch '", s.name, "' lists '", child, "', ",
            it == by_name.end() ? "which no line defines"
                                : "a switch above leaves; vtrain models two tiers (leaves and "
                                  "one spine layer)"));
      }
    }
  }
  t.nodes_per_leaf = static_cast<int64_t>(first_leaf->nodes.size());
  return t;
}

absl::StatusOr<std::vector<int64_t>> NodesByName(const SlurmTopology& topology,
                                                 absl::string_view hostlist) {
  absl::StatusOr<std::vector<std::string>> names = ExpandHostlist(hostlist);
  if (!names.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--nodes: ", names.status().message()));
  }
  absl::flat_hash_map<absl::string_view, int64_t> index;
  for (size_t i = 0; i < topology.node_names.size(); ++i) {
    index.emplace(topology.node_names[i], static_cast<int64_t>(i));
  }
  std::vector<int64_t> nodes;
  nodes.reserve(names->size());
  for (const std::string& name : *names) {
    const auto it = index.find(name);
    if (it == index.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--nodes names host '", name,
          "', which is under no leaf of the topology file; give hosts its Nodes= lines list"));
    }
    nodes.push_back(it->second);
  }
  return nodes;
}

}  // namespace vtrain
