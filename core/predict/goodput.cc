#include "core/predict/goodput.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/spec/model.h"

namespace vtrain {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Daly's higher-order optimum interval for a checkpoint of `delta` seconds
// and a mean time between failures `m`.
double DalyInterval(double delta, double m) {
  if (delta >= 2 * m) return m;
  const double x = delta / (2 * m);
  return std::sqrt(2 * delta * m) * (1 + std::sqrt(x) / 3 + x / 9) - delta;
}

}  // namespace

Goodput EstimateGoodput(const Job& job, double iteration_s, double failure_free_s) {
  const ReliabilitySpec& r = job.cluster.reliability;
  const ParallelPlan& plan = job.plan;
  const int64_t per_node = std::max<int64_t>(1, job.cluster.gpus_per_node);
  const int64_t gpus = JobGpus(job);
  const int64_t nodes = CeilDiv(gpus, per_node);
  Goodput g;
  g.checkpoint_bytes = kCheckpointBytesPerParameter * ModelParameterCount(job.model);
  const int64_t replica_gpus =
      plan.tensor_parallel * plan.context_parallel * plan.pipeline_parallel;
  g.writer_nodes = plan.data_parallel_sharding == DataParallelSharding::kNone
                       ? std::min(nodes, CeilDiv(replica_gpus, per_node))
                       : nodes;
  const double node_bytes_per_s = r.checkpoint_gbps * 1e9 / 8;
  g.checkpoint_write_s =
      g.checkpoint_bytes / (static_cast<double>(g.writer_nodes) * node_bytes_per_s);
  const double writer_gpus = static_cast<double>(std::min(gpus, g.writer_nodes * per_node));
  g.checkpoint_blocking_s = r.async_checkpoint
                                ? g.checkpoint_bytes / writer_gpus / kCheckpointSnapshotBytesPerS
                                : g.checkpoint_write_s;
  const double read_s = g.checkpoint_bytes / (static_cast<double>(nodes) * node_bytes_per_s);
  g.restart_s = r.restart_minutes * 60 + read_s;

  const double t = failure_free_s;
  const double price = job.cluster.price_usd_per_gpu_hour;
  auto finish = [&](double wall_s) {
    g.expected_time_s = wall_s;
    g.fraction = std::isfinite(wall_s) && wall_s > 0 ? t / wall_s : 0;
    g.expected_gpu_hours = wall_s / 3600 * static_cast<double>(gpus);
    g.expected_cost_usd = g.expected_gpu_hours * price;
    return g;
  };
  if (r.node_failures_per_1000_node_days <= 0) {
    // No failures: no checkpoint is needed, unless one was asked for.
    if (r.checkpoint_interval_s <= 0) return finish(t);
    g.checkpoint_interval_iterations =
        std::max<int64_t>(1, std::llround(r.checkpoint_interval_s / iteration_s));
    g.checkpoint_interval_s = static_cast<double>(g.checkpoint_interval_iterations) * iteration_s;
    return finish(t * (1 + g.checkpoint_blocking_s / g.checkpoint_interval_s));
  }
  const double m = 86400 / (static_cast<double>(nodes) * r.node_failures_per_1000_node_days / 1000);
  g.job_mtbf_s = m;
  const double delta = g.checkpoint_blocking_s;
  double tau = r.checkpoint_interval_s > 0 ? r.checkpoint_interval_s : DalyInterval(delta, m);
  tau = std::min(tau, t);
  g.checkpoint_interval_iterations = std::max<int64_t>(1, std::llround(tau / iteration_s));
  tau = static_cast<double>(g.checkpoint_interval_iterations) * iteration_s;
  g.checkpoint_interval_s = tau;
  // An asynchronous write still under way when a failure strikes is lost.
  const double restart_cost = g.restart_s + (r.async_checkpoint ? g.checkpoint_write_s : 0);
  // In logarithms: e^((tau + delta)/M) overflows long before the ratio does.
  const double log_wall =
      std::log(m) + restart_cost / m + std::log(std::expm1((tau + delta) / m)) + std::log(t / tau);
  const double wall = log_wall > 700 ? std::numeric_limits<double>::infinity() : std::exp(log_wall);
  finish(wall);
  if (!std::isfinite(wall)) {
    g.expected_interruptions = std::numeric_limits<double>::infinity();
    return g;
  }
  g.expected_interruptions = wall / m;
  const double checkpointing = t / tau * delta;
  if (g.expected_interruptions > 0) {
    g.lost_work_per_failure_s =
        std::max(0.0, (wall - t - checkpointing) / g.expected_interruptions - g.restart_s);
  }
  return g;
}

}  // namespace vtrain
