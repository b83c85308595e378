// The Prometheus metrics of vtrain-server, all named vtrain_*.
#ifndef VTRAIN_SERVER_METRICS_H_
#define VTRAIN_SERVER_METRICS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "server/view_key.h"

namespace vtrain::server {

class Metrics {
 public:
  Metrics();
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  // One finished RPC.
  void Request(const std::string& method, const std::string& code, double seconds);
  void SimulatedTasks(double n) { simulated_tasks_->Increment(n); }
  // The in-process time of one answer's simulation (its Simulation.wall_ns).
  void SimulationTime(const std::string& method, int64_t wall_ns);
  void Lookups(const std::string& fidelity, double n);
  void ProfileSetsLoaded(double n) { profile_sets_->Set(n); }
  void RegistryUp(bool up) { registry_up_->Set(up ? 1 : 0); }
  void RegistrySyncLag(double seconds) { sync_lag_->Set(seconds); }
  void DatabaseError() { db_errors_->Increment(); }
  void SyncSkipped() { sync_skipped_->Increment(); }
  void WorkDropped(double n) { work_dropped_->Increment(n); }
  void PredictionCacheHit() { prediction_cache_hits_->Increment(); }
  // Every call answered, by full gRPC method name and status code.
  void Call(const std::string& method, const std::string& code) {
    Child(*calls_, "method", method, "code", code).Increment();
  }

 private:
  // The child of `family` with these labels (one label when `name2` is
  // empty), found in a map of children already made: prometheus-cpp's Add
  // builds a label map and hashes it on every call.
  template <typename T, typename... Args>
  T& Child(prometheus::Family<T>& family, const std::string& name1, const std::string& value1,
           const std::string& name2, const std::string& value2, Args&&... args) {
    const ChildView view{&family, value1, value2};
    {
      absl::ReaderMutexLock lock(&children_mu_);
      if (auto it = children_.find(view); it != children_.end()) {
        return *static_cast<T*>(it->second);
      }
    }
    std::map<std::string, std::string> labels{{name1, value1}};
    if (!name2.empty()) labels.emplace(name2, value2);
    T& child = family.Add(labels, std::forward<Args>(args)...);
    absl::MutexLock lock(&children_mu_);
    children_.emplace(ChildKey{&family, value1, value2}, &child);
    return child;
  }
  using ChildKey = std::tuple<const void*, std::string, std::string>;
  using ChildView = std::tuple<const void*, absl::string_view, absl::string_view>;

  absl::Mutex children_mu_;
  // Children live as long as their family (never removed).
  absl::flat_hash_map<ChildKey, void*, ViewHash<ChildView>, ViewEq<ChildView>> children_
      ABSL_GUARDED_BY(children_mu_);
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* requests_;
  prometheus::Family<prometheus::Histogram>* latency_;
  prometheus::Family<prometheus::Histogram>* simulation_;
  prometheus::Family<prometheus::Counter>* lookups_;
  prometheus::Counter* simulated_tasks_;
  prometheus::Gauge* profile_sets_;
  prometheus::Gauge* registry_up_;
  prometheus::Gauge* sync_lag_;
  prometheus::Counter* db_errors_;
  prometheus::Counter* sync_skipped_;
  prometheus::Counter* work_dropped_;
  prometheus::Counter* prediction_cache_hits_;
  prometheus::Family<prometheus::Counter>* calls_;
};

}  // namespace vtrain::server

#endif  // VTRAIN_SERVER_METRICS_H_
