// vtrainctl run in this process (RunVtrainctl with string streams), for the
// client tests that check exit codes and output without a subprocess.
#ifndef VTRAIN_TESTS_TESTING_VTRAINCTL_H_
#define VTRAIN_TESTS_TESTING_VTRAINCTL_H_

#include <sstream>
#include <string>
#include <vector>

#include "client/commands.h"

namespace vtrain::testing {

struct CliResult {
  int code;
  std::string out, err;
};

inline CliResult RunVtrainctlInProcess(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = client::RunVtrainctl(args, out, err);
  return {code, out.str(), err.str()};
}

}  // namespace vtrain::testing

#endif  // VTRAIN_TESTS_TESTING_VTRAINCTL_H_
