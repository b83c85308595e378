#include "server/registry_link.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace vtrain::server {

void RegistryLink::OnChange(std::function<void(bool up)> callback) {
  bool up = false;
  {
    absl::MutexLock lock(&mu_);
    callback_ = callback;
    up = up_;
  }
  callback(up);
}

void RegistryLink::Up() {
  std::function<void(bool)> callback;
  {
    absl::MutexLock lock(&mu_);
    if (up_) return;
    up_ = true;
    since_ = absl::Now();
    callback = callback_;
  }
  if (callback) callback(true);
}

void RegistryLink::Down() {
  std::function<void(bool)> callback;
  {
    absl::MutexLock lock(&mu_);
    if (!up_) return;
    up_ = false;
    since_ = absl::Now();
    callback = callback_;
  }
  if (callback) callback(false);
}

std::string RegistryLink::Warning() const {
  absl::MutexLock lock(&mu_);
  if (up_) return "";
  return absl::StrCat("profile sets from this predictor's cache: its registry ", address_,
                      " has not answered for ",
                      std::floor(absl::ToDoubleSeconds(absl::Now() - since_)), " s");
}

}  // namespace vtrain::server
