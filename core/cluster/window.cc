#include "core/cluster/window.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace vtrain {

double OfferedLoad(const std::vector<WindowJob>& jobs, int64_t total_gpus) {
  if (jobs.empty() || total_gpus <= 0) return 0;
  double first = jobs[0].submit_s, last = first, gpu_s = 0;
  for (const WindowJob& j : jobs) {
    first = std::min(first, j.submit_s);
    last = std::max(last, j.submit_s);
    gpu_s += j.duration_s * static_cast<double>(j.gpus);
  }
  const double window = last - first;
  return window > 0 ? gpu_s / (window * static_cast<double>(total_gpus)) : 0;
}

int64_t PeakRequestedGpus(const std::vector<WindowJob>& jobs) {
  // (time, change of GPUs asked for); at equal times ends (negative) first.
  std::vector<std::pair<double, int64_t>> events;
  events.reserve(2 * jobs.size());
  for (const WindowJob& j : jobs) {
    events.emplace_back(j.submit_s, j.gpus);
    events.emplace_back(j.submit_s + j.duration_s, -j.gpus);
  }
  std::sort(events.begin(), events.end());
  int64_t now = 0, peak = 0;
  for (const auto& [time_s, change] : events) {
    now += change;
    peak = std::max(peak, now);
  }
  return peak;
}

absl::Status ShapeWindow(std::vector<WindowJob>& jobs, int64_t total_gpus,
                         std::optional<double> target_load, std::optional<double> deadline_slack) {
  if (target_load && !(*target_load > 0 && *target_load <= 100)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "target_load=", *target_load, " (--target-load) must be in (0, 100], e.g. 0.8"));
  }
  if (deadline_slack && !(*deadline_slack > 0 && *deadline_slack <= 1000)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "deadline_slack=", *deadline_slack, " (--deadline-slack) must be in (0, 1000], e.g. 1.5"));
  }
  if (target_load) {
    const double load = OfferedLoad(jobs, total_gpus);
    if (!(load > 0)) {
      return absl::InvalidArgumentError(
          "target_load (--target-load) needs a window whose jobs arrive at two or more "
          "different times; take more jobs or a longer window");
    }
    double first = jobs[0].submit_s;
    for (const WindowJob& j : jobs) first = std::min(first, j.submit_s);
    // Load is inversely proportional to the window's length.
    const double scale = load / *target_load;
    for (WindowJob& j : jobs) {
      const double slack = j.deadline_s - j.submit_s;
      j.submit_s = first + (j.submit_s - first) * scale;
      j.deadline_s = j.submit_s + slack;
    }
  }
  if (deadline_slack) {
    for (WindowJob& j : jobs) j.deadline_s = j.submit_s + *deadline_slack * j.duration_s;
  }
  return absl::OkStatus();
}

}  // namespace vtrain
