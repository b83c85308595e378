#include "core/calibrate/minimize.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace vtrain {

MinimizeResult Minimize(const std::function<double(const std::vector<double>&)>& f,
                        std::vector<double> x0, const MinimizeOptions& options) {
  const size_t n = x0.size();
  MinimizeResult result;
  auto eval = [&](const std::vector<double>& x) {
    ++result.evaluations;
    const double v = f(x);
    return std::isfinite(v) ? v : 1e300;
  };
  std::vector<std::vector<double>> simplex(n + 1, x0);
  std::vector<double> values(n + 1);
  for (size_t i = 0; i < n; ++i) simplex[i + 1][i] += options.initial_step;
  for (size_t i = 0; i <= n; ++i) values[i] = eval(simplex[i]);

  std::vector<size_t> order(n + 1);
  while (result.evaluations < options.max_evaluations) {
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return values[a] < values[b]; });
    const size_t best = order.front(), worst = order.back(), second = order[n - 1];
    if (std::abs(values[worst] - values[best]) <=
        options.tolerance * (std::abs(values[best]) + 1e-12)) {
      break;
    }
    std::vector<double> centroid(n, 0.0);
    for (size_t i : order) {
      if (i == worst) continue;
      for (size_t k = 0; k < n; ++k) centroid[k] += simplex[i][k] / static_cast<double>(n);
    }
    auto along = [&](double t) {
      std::vector<double> x(n);
      for (size_t k = 0; k < n; ++k) x[k] = centroid[k] + t * (simplex[worst][k] - centroid[k]);
      return x;
    };
    std::vector<double> reflected = along(-1.0);
    const double fr = eval(reflected);
    if (fr < values[best]) {
      std::vector<double> expanded = along(-2.0);
      const double fe = eval(expanded);
      if (fe < fr) {
        simplex[worst] = std::move(expanded);
        values[worst] = fe;
      } else {
        simplex[worst] = std::move(reflected);
        values[worst] = fr;
      }
      continue;
    }
    if (fr < values[second]) {
      simplex[worst] = std::move(reflected);
      values[worst] = fr;
      continue;
    }
    std::vector<double> contracted = along(fr < values[worst] ? -0.5 : 0.5);
    const double fc = eval(contracted);
    if (fc < std::min(fr, values[worst])) {
      simplex[worst] = std::move(contracted);
      values[worst] = fc;
      continue;
    }
    // Shrink towards the best vertex.
    for (size_t i = 0; i <= n; ++i) {
      if (i == best) continue;
      for (size_t k = 0; k < n; ++k) {
        simplex[i][k] = simplex[best][k] + 0.5 * (simplex[i][k] - simplex[best][k]);
      }
      values[i] = eval(simplex[i]);
    }
  }
  const size_t best =
      static_cast<size_t>(std::min_element(values.begin(), values.end()) - values.begin());
  result.x = simplex[best];
  result.value = values[best];
  return result;
}

}  // namespace vtrain
