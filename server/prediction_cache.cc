#include "server/prediction_cache.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace vtrain::server {

std::string PredictionCache::Key(const std::string& set_id, const v1::PredictRequest& request) {
  // The set's id is its content's hash; the request's bytes follow it.
  return absl::StrCat(set_id.size(), ":", set_id, request.SerializeAsString());
}

std::shared_ptr<const PredictionCache::Answer> PredictionCache::Get(const std::string& key) const {
  if (!enabled()) return nullptr;
  absl::ReaderMutexLock lock(&mu_);
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : it->second;
}

void PredictionCache::Put(const std::string& key, std::shared_ptr<const Answer> answer) {
  if (!enabled()) return;
  absl::MutexLock lock(&mu_);
  if (entries_.size() >= max_entries_) entries_.clear();
  entries_[key] = std::move(answer);
}

size_t PredictionCache::size() const {
  absl::ReaderMutexLock lock(&mu_);
  return entries_.size();
}

}  // namespace vtrain::server
