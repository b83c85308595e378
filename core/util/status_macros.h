// Status propagation and invariant checks for vtrain (abseil 20220623 has no
// ABSL_RETURN_IF_ERROR or absl/log, so these are small equivalents).
#ifndef VTRAIN_CORE_UTIL_STATUS_MACROS_H_
#define VTRAIN_CORE_UTIL_STATUS_MACROS_H_

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define VTRAIN_STATUS_CONCAT_INNER_(a, b) a##b
#define VTRAIN_STATUS_CONCAT_(a, b) VTRAIN_STATUS_CONCAT_INNER_(a, b)

// Returns the status from the enclosing function if `expr` is not OK.
#define VTRAIN_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::absl::Status vtrain_status_ = (expr);          \
    if (!vtrain_status_.ok()) return vtrain_status_; \
  } while (false)

// `VTRAIN_ASSIGN_OR_RETURN(auto x, MakeX());` assigns the value of a StatusOr
// or returns its error status from the enclosing function.
#define VTRAIN_ASSIGN_OR_RETURN(lhs, rexpr) \
  VTRAIN_ASSIGN_OR_RETURN_IMPL_(VTRAIN_STATUS_CONCAT_(vtrain_statusor_, __LINE__), lhs, rexpr)
#define VTRAIN_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                  \
  if (!statusor.ok()) return std::move(statusor).status();  \
  lhs = std::move(statusor).value()

// Aborts on a broken internal invariant. Never use for input validation:
// invalid input is reported with absl::InvalidArgumentError.
#define VTRAIN_CHECK(cond)                                                                 \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      std::fprintf(stderr, "%s:%d: VTRAIN_CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                        \
    }                                                                                      \
  } while (false)

#endif  // VTRAIN_CORE_UTIL_STATUS_MACROS_H_
