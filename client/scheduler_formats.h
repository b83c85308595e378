// Throughput tables in the formats cluster schedulers read, from the curves
// of one ThroughputCurveRequest whose jobs are a model's global batches on
// one or more GPU types (vtrainctl curve --format):
//   elasticflow: ElasticFlow's throughput files (scheduler/profiles.py in
//     pkusys/ElasticFlow): one CSV per model, named after it, header
//     "global_batch_size,1,2,4,..." (the GPU counts), one row per global
//     batch, iterations per second, "nan" where no plan fits;
//   matrix-json: a jobs x GPU types x GPU counts matrix of iterations per
//     second (null where no plan fits), as Gavel- and Sia-style schedulers
//     keep their throughput estimates.
#ifndef VTRAIN_CLIENT_SCHEDULER_FORMATS_H_
#define VTRAIN_CLIENT_SCHEDULER_FORMATS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "vtrain/v1/vtrain.pb.h"

namespace vtrain::client {

// What each job of the request was: its model's name, GPU and global batch.
struct CurveJobLabel {
  std::string model, gpu;
  int64_t global_batch = 0;
};

// The ElasticFlow file of each model (name -> CSV text) from `r`'s curves,
// labelled by `labels` (same order).
std::map<std::string, std::string> ElasticFlowFiles(const v1::ThroughputCurveResponse& r,
                                                    const std::vector<CurveJobLabel>& labels);

// The matrix as JSON: {"unit": "iterations_per_s", "jobs": [...], "gpu_types":
// [...], "gpu_counts": [...], "throughput": {job: {gpu: {count: value}}}};
// a job is "MODEL@GLOBAL_BATCH".
std::string ThroughputMatrixJson(const v1::ThroughputCurveResponse& r,
                                 const std::vector<CurveJobLabel>& labels);

}  // namespace vtrain::client

#endif  // VTRAIN_CLIENT_SCHEDULER_FORMATS_H_
