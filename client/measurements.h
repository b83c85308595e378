// Readers for measured data: Megatron iteration-time CSVs (the columns of
// data/a100-megatron-measured), published throughput rows (a plan
// as vtrainctl predict flags beside its published tokens/s/GPU or step
// time) and nccl-tests output.
#ifndef VTRAIN_CLIENT_MEASUREMENTS_H_
#define VTRAIN_CLIENT_MEASUREMENTS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/files.h"
#include "common/nccl_tests.h"
#include "core/calibrate/calibration.h"
#include "core/profile/profile.h"
#include "core/spec/job.h"

namespace vtrain::client {

// The setup of runs that a CSV row does not describe.
struct MeasurementSetup {
  ClusterSpec cluster;  // GPU, GPUs per node, bandwidths (num_gpus comes from the row)
  ParallelPlan plan;    // schedule, recomputation, dtype, bucketing
  int64_t vocab_size = 50257;
  AttentionImpl attention_impl = AttentionImpl::kFlash;
};

// The setup of the measured A100 runs (docs/architecture.md#measured-a100-runs):
// A100-SXM4-80GB, 8 per node, NVLink 150 GB/s, 800 Gb/s per node, fp16, full
// recomputation, 1F1B, Megatron-LM's unfused attention.
MeasurementSetup MegatronA100Setup();

// Parses CSV text with a header naming at least num_gpus, global_batch,
// micro_batch, hidden_size, num_heads, num_layers, seq_len, tp, dp, pp and
// iter_time_ms (other columns are ignored; CRLF is fine). `name` prefixes
// each row's source. INVALID_ARGUMENT names the line and column of the
// first bad cell.
absl::StatusOr<std::vector<Measurement>> ParseMeasurementCsv(absl::string_view text,
                                                             absl::string_view name,
                                                             const MeasurementSetup& setup);

// Parses published throughput rows: CSV text whose header names `flags` (the
// run's plan as `vtrainctl predict` flags, separated by spaces: --model,
// --gpu, --gpus, --tp, ...) and one of tokens_per_sec_per_gpu, step_time_s
// or iter_time_ms; other columns (a `source` URL, the release) are ignored.
// Tokens per second per GPU become the iteration time
// global batch x sequence / (GPUs x tokens/s/GPU). Optional columns
// peak_alloc_gib and peak_reserved_gib hold a measured peak memory per GPU
// (an empty cell: not measured). Lines starting with '#' are comments. INVALID_ARGUMENT names the
// line and column of the first bad cell, or the flag that does not parse.
absl::StatusOr<std::vector<Measurement>> ParsePublishedCsv(absl::string_view text,
                                                           absl::string_view name);

// ParsePublishedCsv when the header names `flags`, else ParseMeasurementCsv.
absl::StatusOr<std::vector<Measurement>> ParseAnyMeasurementCsv(absl::string_view text,
                                                                absl::string_view name,
                                                                const MeasurementSetup& setup);

}  // namespace vtrain::client

#endif  // VTRAIN_CLIENT_MEASUREMENTS_H_
