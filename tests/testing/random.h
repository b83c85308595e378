// Seeded draws for randomized tests that give the same values with any
// standard library (no std distributions, whose output differs between them).
#ifndef VTRAIN_TESTS_TESTING_RANDOM_H_
#define VTRAIN_TESTS_TESTING_RANDOM_H_

#include <cstdint>
#include <initializer_list>
#include <random>

namespace vtrain::testing {

class Random {
 public:
  explicit Random(uint64_t seed) : rng_(seed) {}
  // A value in [lo, hi], inclusive.
  int64_t Uniform(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(rng_() % static_cast<uint64_t>(hi - lo + 1));
  }
  template <typename T>
  T Pick(std::initializer_list<T> values) {
    return *(values.begin() + Uniform(0, static_cast<int64_t>(values.size()) - 1));
  }

 private:
  std::mt19937_64 rng_;
};

}  // namespace vtrain::testing

#endif  // VTRAIN_TESTS_TESTING_RANDOM_H_
