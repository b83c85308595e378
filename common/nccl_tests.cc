#include "common/nccl_tests.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/util/status_macros.h"

namespace vtrain::common {

absl::StatusOr<CollectiveCurve> ParseNcclTests(absl::string_view text, absl::string_view name) {
  std::vector<CollectivePoint> points;
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
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
      continue;
    }
    double bytes = 0, count = 0;
    if (cells.size() < 4 || !absl::SimpleAtod(cells[0], &bytes) ||
        !absl::SimpleAtod(cells[1], &count)) {
      continue;  // a header or a summary line
    }
    // Columns: size, count, type, [redop, root in newer nccl-tests], then the
    // out-of-place time.
    double ignored = 0;
    const size_t time_column = absl::SimpleAtod(cells[3], &ignored) ? 3 : 5;
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
