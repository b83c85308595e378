#include "client/cluster_sim_output.h"

#include <algorithm>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/svg_plot.h"
#include "common/files.h"
#include "core/cluster/job_mix.h"
#include "core/util/status_macros.h"
#include "proto/enum_convert.h"

namespace vtrain::client {
namespace {

// The mix's name as --job-mix spells it.
std::string MixName(v1::JobMix mix) {
  return std::string(JobMixName(proto::FromProto(mix).value_or(JobMix::kItp)));
}

std::string WindowName(const v1::ClusterWindow& w) {
  return w.hours() > 0 ? absl::StrFormat("%gh", w.hours()) : absl::StrCat(w.jobs(), " jobs");
}

std::string LoadName(bool has, double load) { return has ? absl::StrFormat("%g", load) : "traced"; }

}  // namespace

std::string WindowSummary(const v1::ClusterWindowOutcome& r) {
  std::string out =
      absl::StrFormat("%-12s %5s %9s %12s %12s %12s %7s %7s %8s\n", "policy", "jobs", "deadline",
                      "avg_jct_s", "p95_jct_s", "makespan_s", "util", "useful", "reallocs");
  std::vector<std::string> fragmented, shared;
  for (const v1::ClusterPolicyOutcome& o : r.outcomes()) {
    absl::StrAppend(
        &out, absl::StrFormat("%-12s %5d %8.1f%% %12.0f %12.0f %12.0f %6.1f%% %6.1f%% %8d\n",
                              o.policy(), r.jobs(), 100 * o.deadline_satisfaction(), o.avg_jct_s(),
                              o.p95_jct_s(), o.makespan_s(), 100 * o.gpu_utilization(),
                              100 * o.useful_utilization(), o.reallocations()));
    if (o.fragmented_placements() > 0) {
      fragmented.push_back(absl::StrCat(o.policy(), " ", o.fragmented_placements()));
    }
    if (o.spine_shared_gpu_s() > 0) {
      shared.push_back(absl::StrFormat("%s %.1f", o.policy(), o.spine_shared_gpu_s() / 3600));
    }
  }
  if (!fragmented.empty()) {
    absl::StrAppend(&out, "placements on more leaves than needed (run at the spread throughput): ",
                    absl::StrJoin(fragmented, ", "), "\n");
  }
  if (!shared.empty()) {
    absl::StrAppend(&out, "GPU-hours lost to other jobs on shared spine uplinks: ",
                    absl::StrJoin(shared, ", "), "\n");
  }
  if (r.outcomes_size() == 2) {
    const v1::ClusterPolicyOutcome& e = r.outcomes(0);
    const v1::ClusterPolicyOutcome& v = r.outcomes(1);
    absl::StrAppend(
        &out,
        absl::StrFormat(
            "\n%s vs %s: deadline satisfaction %.2fx, average JCT %+.1f%%, makespan %+.1f%%\n",
            v.policy(), e.policy(), r.deadline_ratio(), 100 * r.avg_jct_change(),
            e.makespan_s() > 0 ? 100 * (v.makespan_s() / e.makespan_s() - 1) : 0.0));
  }
  return out;
}

std::string WindowCsv(const v1::ClusterWindowOutcome& r) {
  std::string out = "policy,job_id,shape,admitted,finished,met_deadline,jct_s,reallocations\n";
  for (const v1::ClusterPolicyOutcome& o : r.outcomes()) {
    for (const v1::ClusterJobOutcome& j : o.jobs()) {
      absl::StrAppend(&out, absl::StrFormat("%s,%s,%s,%d,%d,%d,%.3f,%d\n", o.policy(), j.id(),
                                            j.shape(), j.admitted(), j.finished(), j.met_deadline(),
                                            j.jct_s(), j.reallocations()));
    }
  }
  return out;
}

absl::Status WindowPlot(const std::string& path, const v1::ClusterWindowOutcome& r) {
  std::vector<Series> allocated, cdfs;
  for (const v1::ClusterPolicyOutcome& o : r.outcomes()) {
    Series a{o.policy(), {}, true};
    const double t0 = o.allocated().empty() ? 0 : o.allocated(0).time_s();
    for (const v1::ClusterAllocation& x : o.allocated()) {
      a.points.emplace_back((x.time_s() - t0) / 3600, x.gpus());
    }
    allocated.push_back(std::move(a));
    std::vector<double> jcts;
    for (const v1::ClusterJobOutcome& j : o.jobs()) {
      if (j.finished()) jcts.push_back(j.jct_s() / 3600);
    }
    std::sort(jcts.begin(), jcts.end());
    Series c{o.policy(), {}, true};
    for (size_t k = 0; k < jcts.size(); ++k) {
      c.points.emplace_back(jcts[k], static_cast<double>(k + 1) / static_cast<double>(jcts.size()));
    }
    cdfs.push_back(std::move(c));
  }
  VTRAIN_RETURN_IF_ERROR(
      common::WriteFile(path, LinesSvg(allocated, "GPUs allocated over time", "hours", "GPUs")));
  std::string jct_path = path;
  if (absl::EndsWith(jct_path, ".svg")) jct_path.resize(jct_path.size() - 4);
  return common::WriteFile(
      absl::StrCat(jct_path, "-jct.svg"),
      LinesSvg(cdfs, "Job completion time (CDF)", "hours", "fraction of jobs"));
}

std::string StudyTable(const v1::ClusterSimResponse& r) {
  std::string out =
      absl::StrFormat("%-5s %5s %6s %-9s %4s %-11s %5s %6s %6s %6s %5s  %-34s %8s %8s\n", "mix",
                      "gpus", "target", "window", "seed", "rows", "jobs", "trace", "load", "run",
                      "peak", "per policy: deadline, avg JCT (s)", "deadline", "avg_jct");
  double ratio = 0, jct = 0, worst = -1e300;
  int compared = 0, over = 0;
  for (const v1::ClusterWindowOutcome& w : r.windows()) {
    std::string policies;
    for (const v1::ClusterPolicyOutcome& o : w.outcomes()) {
      absl::StrAppend(&policies, absl::StrFormat("%s %.1f%% %.0f  ", o.policy(),
                                                 100 * o.deadline_satisfaction(), o.avg_jct_s()));
    }
    absl::StrAppend(
        &out,
        absl::StrFormat(
            "%-5s %5d %6s %-9s %4d %-11s %5d %6.2f %6.2f %6.2f %5d  %-34s", MixName(w.job_mix()),
            w.gpus(), LoadName(w.has_target_load(), w.target_load()), WindowName(w.window()),
            w.seed(), absl::StrCat(w.first_row(), "-", w.first_row() + w.jobs() - 1), w.jobs(),
            w.trace_load(), w.offered_load(), w.running_load(), w.peak_requested_gpus(), policies));
    if (w.outcomes_size() == 2) {
      absl::StrAppend(
          &out, absl::StrFormat(" %7.2fx %+7.1f%%", w.deadline_ratio(), 100 * w.avg_jct_change()));
      ratio += w.deadline_ratio();
      jct += w.avg_jct_change();
      worst = std::max(worst, w.avg_jct_change());
      over += w.avg_jct_change() > 0.02 ? 1 : 0;
      ++compared;
    }
    absl::StrAppend(&out, "\n");
  }
  if (r.summaries_size() > 0) absl::StrAppend(&out, "\n");
  for (const v1::ClusterStudySummary& s : r.summaries()) {
    absl::StrAppend(
        &out, absl::StrFormat(
                  "%-5s %5d GPUs, load %-6s %-9s %2d windows: average JCT %+6.1f%% mean, "
                  "%+6.1f%% worst; deadlines %.2fx mean, %.2fx worst; data-parallel meets "
                  "%.1f%%\n",
                  MixName(s.job_mix()), s.gpus(), LoadName(s.has_target_load(), s.target_load()),
                  WindowName(s.window()), s.windows(), 100 * s.mean_avg_jct_change(),
                  100 * s.worst_avg_jct_change(), s.mean_deadline_ratio(), s.worst_deadline_ratio(),
                  100 * s.mean_data_parallel_deadline_satisfaction()));
  }
  if (compared > 0) {
    absl::StrAppend(
        &out, absl::StrFormat("\nvtrain vs elasticflow over %d windows: deadline "
                              "satisfaction %.2fx mean; average JCT %+.1f%% mean, "
                              "%+.1f%% worst; %d windows worse than +2%%\n",
                              compared, ratio / compared, 100 * jct / compared, 100 * worst, over));
  }
  return out;
}

}  // namespace vtrain::client
