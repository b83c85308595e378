// Small SVG charts for vtrainctl reports (no plotting library needed).
#ifndef VTRAIN_CLIENT_SVG_PLOT_H_
#define VTRAIN_CLIENT_SVG_PLOT_H_

#include <string>
#include <vector>

namespace vtrain::client {

struct ScatterPoint {
  double x = 0;
  double y = 0;
  std::string label;  // shown as a tooltip
  bool highlight = false;
};

// Predicted (y) against measured (x) on log-log axes, with the y = x line and
// a +/- band_fraction band around it. Non-positive points are skipped.
std::string PredictedVsMeasuredSvg(const std::vector<ScatterPoint>& points, double band_fraction,
                                   const std::string& title);

// Training time (x, days) against cost (y, USD) of plans, log-log: every plan
// grey, the Pareto frontier joined in blue, the chosen plan red.
struct PlanPoint {
  double days = 0;
  double cost_usd = 0;
  std::string label;
  bool frontier = false;
  bool chosen = false;
};
std::string TimeVsCostSvg(const std::vector<PlanPoint>& points, const std::string& title);

// Lines on linear axes (x from 0, y from 0), one colour per series, with a
// legend: throughput against GPUs, GPUs allocated over time, JCT CDFs.
struct Series {
  std::string name;
  // (x, y), drawn in order; a point with a non-finite y is a gap: the line
  // stops before it and starts again after it.
  std::vector<std::pair<double, double>> points;
  bool steps = false;  // a step function (value holds until the next x)
};
std::string LinesSvg(const std::vector<Series>& series, const std::string& title,
                     const std::string& x_label, const std::string& y_label);

}  // namespace vtrain::client

#endif  // VTRAIN_CLIENT_SVG_PLOT_H_
