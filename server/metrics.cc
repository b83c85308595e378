#include "server/metrics.h"

namespace vtrain::server {

Metrics::Metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  requests_ = &prometheus::BuildCounter()
                   .Name("vtrain_requests_total")
                   .Help("RPCs handled, by method and gRPC status code")
                   .Register(*registry_);
  latency_ = &prometheus::BuildHistogram()
                  .Name("vtrain_request_duration_seconds")
                  .Help("RPC latency by method")
                  .Register(*registry_);
  simulation_ = &prometheus::BuildHistogram()
                     .Name("vtrain_simulation_duration_seconds")
                     .Help(
                         "In-process time of the simulation behind each answer, by method "
                         "(the answers' simulation.wall_ns)")
                     .Register(*registry_);
  lookups_ = &prometheus::BuildCounter()
                  .Name("vtrain_profile_lookups_total")
                  .Help("Profile lookups of predictions, by fidelity")
                  .Register(*registry_);
  simulated_tasks_ = &prometheus::BuildCounter()
                          .Name("vtrain_simulated_tasks_total")
                          .Help("Tasks simulated by predictions")
                          .Register(*registry_)
                          .Add({});
  profile_sets_ = &prometheus::BuildGauge()
                       .Name("vtrain_profile_sets_loaded")
                       .Help("Profile sets held in memory")
                       .Register(*registry_)
                       .Add({});
  registry_up_ = &prometheus::BuildGauge()
                      .Name("vtrain_registry_up")
                      .Help("1 while a predictor is connected to its registry")
                      .Register(*registry_)
                      .Add({});
  sync_lag_ = &prometheus::BuildGauge()
                   .Name("vtrain_registry_sync_lag_seconds")
                   .Help("Seconds since a predictor last heard from its registry")
                   .Register(*registry_)
                   .Add({});
  db_errors_ = &prometheus::BuildCounter()
                    .Name("vtrain_database_errors_total")
                    .Help("SQLite errors")
                    .Register(*registry_)
                    .Add({});
  calls_ = &prometheus::BuildCounter()
                .Name("vtrain_grpc_calls_total")
                .Help(
                    "Every call answered, by gRPC method and status code (health checks and "
                    "calls refused before a handler ran, e.g. oversized messages, included)")
                .Register(*registry_);
  work_dropped_ = &prometheus::BuildCounter()
                       .Name("vtrain_profiling_work_dropped_total")
                       .Help("Missing profile keys not queued (queue full or client over its rate)")
                       .Register(*registry_)
                       .Add({});
  prediction_cache_hits_ =
      &prometheus::BuildCounter()
           .Name("vtrain_prediction_cache_hits_total")
           .Help("Predict calls answered from the cache of identical requests (no simulation)")
           .Register(*registry_)
           .Add({});
  sync_skipped_ = &prometheus::BuildCounter()
                       .Name("vtrain_registry_sync_skipped_total")
                       .Help("Registry sets a predictor could not take (too large, invalid)")
                       .Register(*registry_)
                       .Add({});
}

void Metrics::Request(const std::string& method, const std::string& code, double seconds) {
  Child(*requests_, "method", method, "code", code).Increment();
  static const prometheus::Histogram::BucketBoundaries kBuckets = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
      0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
  Child(*latency_, "method", method, "", "", kBuckets).Observe(seconds);
}

void Metrics::SimulationTime(const std::string& method, int64_t wall_ns) {
  // From 10 us (a periodic operator-path prediction) to minutes (searches).
  static const prometheus::Histogram::BucketBoundaries kBuckets = {
      0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
      0.025,   0.05,     0.1,     0.25,   0.5,     1,      2.5,   5,      10,    60};
  Child(*simulation_, "method", method, "", "", kBuckets)
      .Observe(static_cast<double>(wall_ns) * 1e-9);
}

void Metrics::Lookups(const std::string& fidelity, double n) {
  Child(*lookups_, "fidelity", fidelity, "", "").Increment(n);
}

}  // namespace vtrain::server
