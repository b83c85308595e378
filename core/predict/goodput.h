// Training time with failures: the expected wall-clock time of a run of
// known failure-free length on a job's nodes, given how often a node fails,
// how long a checkpoint takes to write and a restart to come back
// (ReliabilitySpec, core/spec/reliability.h), at the checkpoint interval that
// maximises goodput.
//
// The model is Daly's ("A higher order estimate of the optimum checkpoint
// interval for restart dumps", Future Generation Computer Systems 22(3),
// 2006): failures arrive as a Poisson process with the job's mean time
// between failures M = 1 / (nodes x rate); work runs in segments of tau
// seconds, each followed by a checkpoint that blocks training for delta
// seconds; a failure costs the restart R and the work since the last
// checkpoint. The expected wall time of T failure-free seconds is
//   T_w = M e^(R/M) (e^((tau + delta)/M) - 1) T / tau,
// and the interval is Daly's higher-order optimum
//   tau = sqrt(2 delta M) (1 + sqrt(delta/(2M))/3 + delta/(18M)) - delta
// (M when delta >= 2M; Young's sqrt(2 delta M) to first order), rounded to
// whole iterations.
//
// The checkpoint: 14 bytes a parameter (the weights in 16 bits, fp32 main
// weights and Adam's two moments, as Megatron saves them). With a sharded
// optimizer every node writes its shard (distributed checkpointing); without
// one the nodes of one data-parallel replica write it. It is read back at
// restart by every node. Asynchronous checkpointing blocks only for the
// device-to-host copy of a GPU's shard, and a failure during the write
// loses that checkpoint too (the write time counts as lost work).
#ifndef VTRAIN_CORE_PREDICT_GOODPUT_H_
#define VTRAIN_CORE_PREDICT_GOODPUT_H_

#include <cstdint>

#include "core/spec/job.h"

namespace vtrain {

inline constexpr double kCheckpointBytesPerParameter = 14;

struct Goodput {
  double fraction = 1;         // failure-free time / expected time
  double expected_time_s = 0;  // wall clock with failures, checkpoints, restarts
  double expected_interruptions = 0;
  double job_mtbf_s = 0;             // 0: no failures (rate 0)
  double checkpoint_interval_s = 0;  // 0: no checkpoints needed (no failures)
  int64_t checkpoint_interval_iterations = 0;
  double checkpoint_bytes = 0;
  double checkpoint_blocking_s = 0;  // training stopped, a checkpoint
  double checkpoint_write_s = 0;     // until it is on storage
  int64_t writer_nodes = 0;
  double restart_s = 0;  // restart minutes plus reading the checkpoint
  // Work lost per failure beyond the restart: the time since the last
  // complete checkpoint, on average.
  double lost_work_per_failure_s = 0;
  double expected_gpu_hours = 0;
  double expected_cost_usd = 0;  // 0 when the cluster has no price
};

// The goodput of `job` trained for `failure_free_s` seconds of iterations of
// `iteration_s` each (both > 0), with job.cluster.reliability. A run whose
// nodes fail faster than it can checkpoint and restart gets fraction 0 and
// an infinite expected time.
Goodput EstimateGoodput(const Job& job, double iteration_s, double failure_free_s);

}  // namespace vtrain

#endif  // VTRAIN_CORE_PREDICT_GOODPUT_H_
