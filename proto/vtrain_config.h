// Reads vTrain's own job configuration JSON into a vtrain.v1.PredictRequest,
// so a vTrain user's files run unchanged (JobFromProto then validates it).
#ifndef VTRAIN_PROTO_VTRAIN_CONFIG_H_
#define VTRAIN_PROTO_VTRAIN_CONFIG_H_

#include <string>

#include "absl/status/statusor.h"
#include "vtrain/v1/vtrain.pb.h"

namespace vtrain::proto {

// Fields read: num_gpus, tensor/data/pipeline_parallel_size,
// global_batch_size, micro_batch_size, num_layers, hidden_size,
// num_attention_heads, max_length, vocab_size, use_checkpoint,
// use_gradient_bucket, ddp_bucket_size [MB], inter_node_bandwidth [Gb/s],
// intra_node_bandwidth [GB/s], pipeline_scheduling, node_size, gpu_name.
// The model's attention is unfused, as vTrain profiled it.
// INVALID_ARGUMENT names the vTrain field (a missing required one, a
// non-number, a non-integer, a negative size, an unknown schedule).
absl::StatusOr<v1::PredictRequest> RequestFromVtrainConfig(const std::string& json);

}  // namespace vtrain::proto

#endif  // VTRAIN_PROTO_VTRAIN_CONFIG_H_
