#include "server/profile_catalog.h"

#include <algorithm>
#include <cstdint>

#include "google/protobuf/util/time_util.h"

namespace vtrain::server {
namespace {

int64_t CreatedNs(const CatalogEntry& e) {
  return google::protobuf::util::TimeUtil::TimestampToNanoseconds(e.proto.created_at());
}

}  // namespace

bool IsComplete(const ProfileSet& set) { return !set.error_bands.empty(); }

void ProfileCatalog::Add(CatalogEntry entry) {
  absl::MutexLock lock(&mu_);
  entry.sequence = ++sequence_;
  entries_[entry.proto.id()] = std::move(entry);
}

bool ProfileCatalog::Remove(const std::string& id) {
  absl::MutexLock lock(&mu_);
  if (entries_.erase(id) == 0) return false;
  removals_.emplace_back(++sequence_, id);
  if (removals_.size() > kRemembered) {
    forgotten_through_ = removals_.front().first;
    removals_.pop_front();
  }
  return true;
}

std::optional<CatalogEntry> ProfileCatalog::Get(const std::string& id) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

bool ProfileCatalog::Contains(const std::string& id) const {
  absl::MutexLock lock(&mu_);
  return entries_.count(id) > 0;
}

std::shared_ptr<const ProfileSet> ProfileCatalog::Tables(const std::string& id) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : it->second.tables;
}

std::shared_ptr<const ProfileSet> ProfileCatalog::NewestTables(const std::string& gpu) const {
  absl::MutexLock lock(&mu_);
  const CatalogEntry* e = NewestLocked(gpu);
  return e == nullptr ? nullptr : e->tables;
}

const CatalogEntry* ProfileCatalog::NewestLocked(const std::string& gpu) const {
  const CatalogEntry* best = nullptr;
  for (const auto& [id, e] : entries_) {
    if (e.proto.gpu() != gpu || !IsComplete(*e.tables)) continue;
    if (best == nullptr || (best->builtin && !e.builtin) ||
        (best->builtin == e.builtin && CreatedNs(e) > CreatedNs(*best))) {
      best = &e;
    }
  }
  return best;
}

ProfileCatalog::DefaultSets ProfileCatalog::DefaultFor(const std::string& gpu) const {
  absl::MutexLock lock(&mu_);
  DefaultSets out;
  const CatalogEntry* base = NewestLocked(gpu);
  const int64_t after = base == nullptr ? INT64_MIN : CreatedNs(*base);
  if (base != nullptr) out.base = base->tables;
  std::vector<const CatalogEntry*> partial;
  for (const auto& [id, e] : entries_) {
    if (e.proto.gpu() == gpu && !IsComplete(*e.tables) && CreatedNs(e) > after) {
      partial.push_back(&e);
    }
  }
  std::sort(partial.begin(), partial.end(), [](const CatalogEntry* a, const CatalogEntry* b) {
    return CreatedNs(*a) != CreatedNs(*b) ? CreatedNs(*a) < CreatedNs(*b)
                                          : a->proto.id() < b->proto.id();
  });
  for (const CatalogEntry* e : partial) out.overlays.push_back(e->tables);
  return out;
}

std::vector<CatalogEntry> ProfileCatalog::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<CatalogEntry> out;
  for (const auto& [id, e] : entries_) out.push_back(e);
  return out;
}

std::vector<std::string> ProfileCatalog::Ids() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> ids;
  ids.reserve(entries_.size());
  for (const auto& [id, e] : entries_) ids.push_back(id);
  return ids;
}

int64_t ProfileCatalog::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(entries_.size());
}

ProfileCatalog::Changes ProfileCatalog::WaitForNewer(int64_t after, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto newer = [this, after]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return sequence_ > after; };
  mu_.AwaitWithTimeout(absl::Condition(&newer), timeout);
  Changes out;
  out.sequence = sequence_;
  out.gap = after < forgotten_through_;
  for (const auto& [id, e] : entries_) {
    if (e.sequence > after) out.added.push_back(e);
  }
  std::sort(out.added.begin(), out.added.end(),
            [](const CatalogEntry& a, const CatalogEntry& b) { return a.sequence < b.sequence; });
  for (const auto& [sequence, id] : removals_) {
    if (sequence > after) out.removed.push_back(id);
  }
  return out;
}

}  // namespace vtrain::server
