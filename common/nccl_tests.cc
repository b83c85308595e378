#include "common/nccl_tests.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/util/status_macros.h"

namespace vtrain::common {

namespace {

// The index of the time column in a header line ("#  size count type redop
// root time algbw ..." or "size(B),count,type,time(ns),..."), or -1 when the
// line is not a column header.
int TimeColumnOfHeader(absl::string_view line) {
  absl::string_view rest = absl::StripLeadingAsciiWhitespace(line);
  while (absl::ConsumePrefix(&rest, "#")) {
  }
  const std::vector<absl::string_view> names =
      absl::StrSplit(rest, absl::ByAnyChar(", \t"), absl::SkipEmpty());
  if (names.empty() || !absl::StartsWith(names[0], "size")) return -1;
  for (size_t i = 1; i < names.size(); ++i) {
    if (absl::StartsWith(names[i], "time")) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

std::optional<Collective> InferNcclCollective(absl::string_view text, absl::string_view file_name) {
  struct Name {
    const char* text;
    Collective collective;
  };
  static constexpr Name kNames[] = {
      {"all_reduce", Collective::kAllReduce},
      {"allreduce", Collective::kAllReduce},
      {"all_gather", Collective::kAllGather},
      {"allgather", Collective::kAllGather},
      {"reduce_scatter", Collective::kReduceScatter},
      {"reducescatter", Collective::kReduceScatter},
      {"sendrecv", Collective::kSendRecv},
      {"send_recv", Collective::kSendRecv},
      {"alltoall", Collective::kAllToAll},
      {"all_to_all", Collective::kAllToAll},
  };
  auto find = [](absl::string_view in) -> std::optional<Collective> {
    const std::string lower = absl::AsciiStrToLower(in);
    for (const Name& n : kNames) {
      if (absl::StrContains(lower, n.text)) return n.collective;
    }
    return std::nullopt;
  };
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    const size_t at = line.find("Collective test starting:");
    if (at != absl::string_view::npos) {
      if (std::optional<Collective> c = find(line.substr(at))) return c;
    }
  }
  const size_t slash = file_name.find_last_of('/');
  return find(slash == absl::string_view::npos ? file_name : file_name.substr(slash + 1));
}

absl::StatusOr<CollectiveCurve> ParseNcclTests(absl::string_view text, absl::string_view name) {
  std::vector<CollectivePoint> points;
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  int header_time_column = -1;
  // nccl-tests prints times in microseconds under a "(us)" header; vTrain's
  // A100 files say "time(ns)" in theirs.
  double ns_per_unit = 1e3;
  for (size_t n = 0; n < lines.size(); ++n) {
    const absl::string_view line = absl::StripAsciiWhitespace(lines[n]);
    if (line.empty()) continue;
    // nccl-tests prints whitespace-separated columns; vTrain's copies use commas.
    const std::vector<absl::string_view> cells =
        absl::StrSplit(line, absl::ByAnyChar(", \t"), absl::SkipEmpty());
    if (cells.empty()) continue;  // only separators: nothing to read
    double first = 0;
    if (!absl::SimpleAtod(cells[0], &first)) {
      if (absl::StrContains(line, "(ns)")) ns_per_unit = 1;
      if (absl::StrContains(line, "(us)")) ns_per_unit = 1e3;
      if (const int column = TimeColumnOfHeader(line); column > 0) header_time_column = column;
      continue;
    }
    double bytes = 0, count = 0;
    if (cells.size() < 4 && cells.size() > 1 && absl::SimpleAtod(cells[1], &count)) {
      // Starts like a measurement (two numbers) but is cut short.
      return absl::InvalidArgumentError(absl::StrCat(
          name, ":", n + 1, ": a measurement line with ", cells.size(),
          " columns; nccl-tests rows read 'size count type [redop root] time algbw busbw ...'"));
    }
    if (cells.size() < 4 || !absl::SimpleAtod(cells[0], &bytes) ||
        !absl::SimpleAtod(cells[1], &count)) {
      continue;  // a header or a summary line
    }
    // Columns: size, count, type, [redop, root in newer nccl-tests], then the
    // out-of-place time: where the header says, else the first number after
    // type that is not the root (-1 or a rank following a redop name).
    double ignored = 0;
    size_t time_column = absl::SimpleAtod(cells[3], &ignored) ? 3 : 5;
    if (header_time_column > 0) time_column = static_cast<size_t>(header_time_column);
    double time = 0;
    const bool found = time_column < cells.size() && absl::SimpleAtod(cells[time_column], &time);
    if (!found || !(bytes > 0) || !(time > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ":", n + 1, ": expected 'size count type time ...'"));
    }
    points.push_back({bytes, time * ns_per_unit});
  }
  if (points.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": no measurement lines found"));
  }
  return CollectiveCurve::Create(std::move(points));
}

}  // namespace vtrain::common
