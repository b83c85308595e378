#include "proto/reliability_convert.h"

namespace vtrain::proto {

ReliabilitySpec ReliabilityFromProto(const v1::Reliability& in) {
  ReliabilitySpec r;
  if (in.has_node_failures_per_1000_node_days()) {
    r.node_failures_per_1000_node_days = in.node_failures_per_1000_node_days();
  }
  if (in.has_checkpoint_gbps()) r.checkpoint_gbps = in.checkpoint_gbps();
  r.async_checkpoint = in.async_checkpoint();
  if (in.has_restart_minutes()) r.restart_minutes = in.restart_minutes();
  if (in.has_checkpoint_interval_s()) r.checkpoint_interval_s = in.checkpoint_interval_s();
  return r;
}

void ReliabilityToProto(const ReliabilitySpec& r, v1::Reliability* out) {
  out->set_node_failures_per_1000_node_days(r.node_failures_per_1000_node_days);
  out->set_checkpoint_gbps(r.checkpoint_gbps);
  out->set_async_checkpoint(r.async_checkpoint);
  out->set_restart_minutes(r.restart_minutes);
  out->set_checkpoint_interval_s(r.checkpoint_interval_s);
}

void GoodputToProto(const Goodput& g, v1::Goodput* out) {
  out->set_fraction(g.fraction);
  out->set_expected_days(g.expected_time_s / 86400);
  out->set_expected_interruptions(g.expected_interruptions);
  out->set_checkpoint_interval_s(g.checkpoint_interval_s);
  out->set_checkpoint_interval_iterations(g.checkpoint_interval_iterations);
  out->set_checkpoint_bytes(g.checkpoint_bytes);
  out->set_checkpoint_blocking_s(g.checkpoint_blocking_s);
  out->set_checkpoint_write_s(g.checkpoint_write_s);
  out->set_writer_nodes(g.writer_nodes);
  out->set_restart_s(g.restart_s);
  out->set_lost_work_per_failure_s(g.lost_work_per_failure_s);
  out->set_job_mtbf_s(g.job_mtbf_s);
  out->set_expected_gpu_hours(g.expected_gpu_hours);
  out->set_expected_cost_usd(g.expected_cost_usd);
}

Goodput GoodputFromProto(const v1::Goodput& in) {
  Goodput g;
  g.fraction = in.fraction();
  g.expected_time_s = in.expected_days() * 86400;
  g.expected_interruptions = in.expected_interruptions();
  g.checkpoint_interval_s = in.checkpoint_interval_s();
  g.checkpoint_interval_iterations = in.checkpoint_interval_iterations();
  g.checkpoint_bytes = in.checkpoint_bytes();
  g.checkpoint_blocking_s = in.checkpoint_blocking_s();
  g.checkpoint_write_s = in.checkpoint_write_s();
  g.writer_nodes = in.writer_nodes();
  g.restart_s = in.restart_s();
  g.lost_work_per_failure_s = in.lost_work_per_failure_s();
  g.job_mtbf_s = in.job_mtbf_s();
  g.expected_gpu_hours = in.expected_gpu_hours();
  g.expected_cost_usd = in.expected_cost_usd();
  return g;
}

}  // namespace vtrain::proto
