// Whether a predictor is in contact with its registry, for the ones who ask:
// the follower reports contact and loss, Health serves it under its own
// service name, and every prediction answer carries a warning while the
// registry is away (the answer then comes from the predictor's cache).
#ifndef VTRAIN_SERVER_REGISTRY_LINK_H_
#define VTRAIN_SERVER_REGISTRY_LINK_H_

#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace vtrain::server {

// The Health service name a predictor reports its registry under: SERVING
// in contact, NOT_SERVING away (the server itself, "", stays SERVING: it
// answers from its cache).
inline constexpr char kRegistryHealthService[] = "vtrain.v1.ProfileRegistry/follow";

class RegistryLink {
 public:
  explicit RegistryLink(std::string address) : address_(std::move(address)) {}
  // Called on every change of contact (from the follower's thread).
  void OnChange(std::function<void(bool up)> callback);
  void Up();
  void Down();
  // Empty in contact; else "profile sets from this predictor's cache: its
  // registry HOST:PORT has not answered for N s".
  std::string Warning() const;

 private:
  const std::string address_;
  mutable absl::Mutex mu_;
  bool up_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time since_ ABSL_GUARDED_BY(mu_) = absl::Now();  // of the current state
  std::function<void(bool)> callback_ ABSL_GUARDED_BY(mu_);
};

}  // namespace vtrain::server

#endif  // VTRAIN_SERVER_REGISTRY_LINK_H_
