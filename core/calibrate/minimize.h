// Derivative-free minimisation (Nelder-Mead simplex) for fitting the few
// free parameters of the analytical model.
#ifndef VTRAIN_CORE_CALIBRATE_MINIMIZE_H_
#define VTRAIN_CORE_CALIBRATE_MINIMIZE_H_

#include <functional>
#include <vector>

namespace vtrain {

struct MinimizeOptions {
  int max_evaluations = 400;
  double initial_step = 0.3;  // simplex edge, in the units of x
  double tolerance = 1e-5;    // stop when the simplex's values differ less
};

struct MinimizeResult {
  std::vector<double> x;
  double value = 0;
  int evaluations = 0;
};

// Minimises f from x0 with the Nelder-Mead simplex method (Nelder & Mead
// 1965; coefficients 1, 2, 0.5, 0.5). Deterministic.
MinimizeResult Minimize(const std::function<double(const std::vector<double>&)>& f,
                        std::vector<double> x0, const MinimizeOptions& options = {});

}  // namespace vtrain

#endif  // VTRAIN_CORE_CALIBRATE_MINIMIZE_H_
