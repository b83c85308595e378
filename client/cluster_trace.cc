#include "client/cluster_trace.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace vtrain::client {

absl::StatusOr<std::vector<TraceJob>> ParseTrace(const std::string& text, const std::string& name) {
  std::vector<TraceJob> jobs;
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  for (size_t n = 1; n < lines.size(); ++n) {  // line 1 is the header
    const absl::string_view line = absl::StripAsciiWhitespace(lines[n]);
    if (line.empty()) continue;
    const std::vector<absl::string_view> cells = absl::StrSplit(line, ',');
    TraceJob j;
    double gpus = 0;
    // Times are seconds on the trace's clock: finite, and at most about 300
    // years (the simulation adds them up).
    auto time = [](absl::string_view cell, double* out) {
      return absl::SimpleAtod(cell, out) && std::isfinite(*out) && std::abs(*out) < 1e10;
    };
    if (cells.size() < 8 || !time(cells[1], &j.submit_s) || !time(cells[4], &j.deadline_s) ||
        !absl::SimpleAtod(cells[6], &gpus) || !time(cells[7], &j.duration_s) ||
        !(j.duration_s > 0) || !(gpus >= 1) || gpus > 1e6 || !(j.deadline_s >= j.submit_s)) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ":", n + 1,
          ": expected job_id, submission_time, num_iteration, model_name, deadline, batch_size, "
          "num_gpu, duration with finite times, num_gpu in [1, 1000000], duration > 0 and the "
          "deadline after the submission"));
    }
    j.id = std::string(cells[0]);
    j.num_gpu = static_cast<int64_t>(gpus);
    jobs.push_back(std::move(j));
  }
  if (jobs.empty()) return absl::InvalidArgumentError(absl::StrCat(name, ": no jobs"));
  std::stable_sort(jobs.begin(), jobs.end(),
                   [](const TraceJob& a, const TraceJob& b) { return a.submit_s < b.submit_s; });
  return jobs;
}

}  // namespace vtrain::client
