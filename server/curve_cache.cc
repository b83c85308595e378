#include "server/curve_cache.h"

namespace vtrain::server {

bool CurveCache::Get(const std::string& key, v1::Curve* out) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return false;
  ++hits_;
  *out = it->second;
  return true;
}

void CurveCache::Put(const std::string& key, const v1::Curve& curve) {
  absl::MutexLock lock(&mu_);
  // Curves are cheap to recompute and the key space is open: a bound keeps
  // the memory flat whatever callers ask.
  if (entries_.size() >= kMaxEntries) entries_.clear();
  entries_[key] = curve;
}

int64_t CurveCache::hits() const {
  absl::MutexLock lock(&mu_);
  return hits_;
}

}  // namespace vtrain::server
