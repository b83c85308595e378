// Shared by the job fuzz targets: a request converted as the server does and
// predicted when small.
#ifndef VTRAIN_TESTS_FUZZ_FUZZ_PREDICT_H_
#define VTRAIN_TESTS_FUZZ_FUZZ_PREDICT_H_

#include <cstdint>
#include <string>

#include "core/predict/predictor.h"
#include "core/profile/default_profiles.h"
#include "proto/job_convert.h"
#include "proto/megatron_args.h"
#include "tests/fuzz/fuzz_check.h"

namespace vtrain::fuzz {

// Converts and validates `request` as the server does, and predicts it on the
// built-in profile set when it is small enough to take milliseconds (the
// fuzzer looks for crashes and undefined behaviour, not for slow jobs).
inline void ConvertAndPredict(const v1::PredictRequest& request) {
  absl::StatusOr<Job> job = proto::JobFromProto(request);
  absl::StatusOr<PredictOptions> options = proto::OptionsFromProto(request);
  if (!job.ok() || !options.ok()) return;
  // What the job converts back to must be accepted again.
  absl::StatusOr<Job> again = proto::JobFromProto(proto::JobToProto(*job));
  VTRAIN_FUZZ_CHECK(again.ok(), again.status().ToString());

  const ParallelPlan& plan = job->plan;
  const int64_t micro_batches = plan.global_batch / (plan.data_parallel * plan.micro_batch);
  if (job->model.num_layers > 256 || micro_batches > 256 || plan.pipeline_parallel > 64 ||
      job->model.num_layers * micro_batches > 4096) {
    return;
  }
  options->max_tasks = 200'000;
  absl::StatusOr<Prediction> p = Predict(*job, DefaultProfileSet(job->cluster.gpu), *options);
  if (!p.ok()) return;
  VTRAIN_FUZZ_CHECK(p->iteration_time_ns >= 0, std::to_string(p->iteration_time_ns));
  VTRAIN_FUZZ_CHECK(p->iterations >= 0, std::to_string(p->iterations));
}

// A launch's job (a launch script or a config dump) with what it leaves out
// given as a caller would (flags), converted and predicted.
inline void PredictLaunch(const proto::MegatronJob& job) {
  v1::PredictRequest request = job.request;
  for (const auto& m : job.missing) {
    if (m.flag == "vocab") request.mutable_model()->set_vocab_size(32000);
    if (m.flag == "seq-len") request.mutable_model()->set_seq_len(1024);
    if (m.flag == "global-batch") request.mutable_plan()->set_global_batch(64);
  }
  if (!request.cluster().has_num_gpus()) request.mutable_cluster()->set_num_gpus(8);
  ConvertAndPredict(request);
}

}  // namespace vtrain::fuzz

#endif  // VTRAIN_TESTS_FUZZ_FUZZ_PREDICT_H_
