// Shared by the fuzz targets: a check that aborts, so libFuzzer and the
// corpus test report an accepted input that breaks a property.
#ifndef VTRAIN_TESTS_FUZZ_FUZZ_CHECK_H_
#define VTRAIN_TESTS_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>
#include <string>

// Aborts with `what` when `cond` is false: a property every accepted input
// must have (an invariant of the parser, not input validation).
#define VTRAIN_FUZZ_CHECK(cond, what)                                                       \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      std::fprintf(stderr, "%s:%d: fuzz check failed: %s: %s\n", __FILE__, __LINE__, #cond, \
                   std::string(what).c_str());                                              \
      std::abort();                                                                         \
    }                                                                                       \
  } while (false)

#endif  // VTRAIN_TESTS_FUZZ_FUZZ_CHECK_H_
