#include "server/memo_cache.h"

#include <utility>

namespace vtrain::server {
namespace {

// A memo and the set it refers to, freed together.
struct Holder {
  explicit Holder(std::shared_ptr<const ProfileSet> s)
      : set(std::move(s)), memo(*set, MemoCache::kMaxOperatorsPerSet) {}
  std::shared_ptr<const ProfileSet> set;
  LookupMemo memo;
};

}  // namespace

std::shared_ptr<LookupMemo> MemoCache::For(const std::shared_ptr<const ProfileSet>& set) {
  absl::MutexLock lock(&mu_);
  ++clock_;
  // The key is the set's address; an entry holds its set, so the address
  // cannot be reused by another set while the entry exists.
  if (auto it = entries_.find(set.get()); it != entries_.end()) {
    it->second.used = clock_;
    return it->second.memo;
  }
  if (entries_.size() >= kMaxSets) {
    auto oldest = entries_.begin();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->second.used < oldest->second.used) oldest = it;
    }
    entries_.erase(oldest);  // calls holding its memo keep it until they end
  }
  auto holder = std::make_shared<Holder>(set);
  std::shared_ptr<LookupMemo> memo(holder, &holder->memo);
  entries_[set.get()] = Entry{memo, clock_};
  return memo;
}

size_t MemoCache::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

}  // namespace vtrain::server
