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

namespace {

size_t BytesOf(const std::string& key, const PredictionCache::Answer& a) {
  size_t n = key.size() + a.response.SpaceUsedLong() + a.gpu.size();
  for (const std::string& k : a.missing_keys) n += k.size() + sizeof(std::string);
  return n;
}

}  // namespace

void PredictionCache::Put(const std::string& key, std::shared_ptr<const Answer> answer) {
  if (!enabled()) return;
  const size_t n = BytesOf(key, *answer);
  if (n > max_bytes_) return;
  absl::MutexLock lock(&mu_);
  if (entries_.contains(key)) return;  // answered twice at once: the same answer
  if (entries_.size() >= max_entries_ || bytes_ + n > max_bytes_) {
    entries_.clear();
    bytes_ = 0;
  }
  entries_.emplace(key, std::move(answer));
  bytes_ += n;
}

size_t PredictionCache::bytes() const {
  absl::ReaderMutexLock lock(&mu_);
  return bytes_;
}

size_t PredictionCache::size() const {
  absl::ReaderMutexLock lock(&mu_);
  return entries_.size();
}

}  // namespace vtrain::server
