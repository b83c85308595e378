// Converts between core types and vtrain.v1 messages (and their JSON form).
// The only code that sees both worlds; server, client and agent share it.
#ifndef VTRAIN_PROTO_CONVERT_H_
#define VTRAIN_PROTO_CONVERT_H_

#include <string>

#include "absl/status/statusor.h"
#include "core/plan/search.h"
#include "core/predict/predictor.h"
#include "core/profile/profile.h"
#include "core/spec/job.h"
#include "vtrain/v1/vtrain.pb.h"

namespace vtrain::convert {

// The job of a request, defaults filled in (see the comments in
// vtrain.proto) and validated: INVALID_ARGUMENT names the field path
// ("plan.tensor_parallel") and the fix; NOT_FOUND an unknown preset or GPU.
absl::StatusOr<Job> JobFromProto(const v1::PredictRequest& request);
PredictOptions OptionsFromProto(const v1::PredictRequest& request);

// The request that describes `job`.
v1::PredictRequest JobToProto(const Job& job);

void PredictionToProto(const Job& job, const Prediction& prediction, v1::PredictResponse* out);
// The reverse, for clients that print a server's prediction like a local one.
Prediction PredictionFromProto(const v1::PredictResponse& response);

// Plan search: the space and options of a request (INVALID_ARGUMENT naming
// the field), and the result as a message.
absl::StatusOr<SearchSpace> SearchSpaceFromProto(const v1::SearchRequest& request);
absl::StatusOr<SearchOptions> SearchOptionsFromProto(const v1::SearchRequest& request);
v1::SearchRequest SearchToProto(const SearchSpace& space, const std::string& objective,
                                double deadline_days, int top);
void SearchResultToProto(const SearchResult& result, int top, v1::SearchResult* out);
SearchResult SearchResultFromProto(const v1::SearchResult& result, const SearchSpace& space);

// Profile sets. FromProto validates every key, kernel and curve.
absl::StatusOr<ProfileSet> ProfileSetFromProto(const v1::ProfileSet& set);
v1::ProfileSet ProfileSetToProto(const ProfileSet& set);

// The content hash of a set ("sha256:<hex>"): SHA-256 of its deterministic
// serialization without id and created_at, operators and curves sorted.
std::string ContentId(const v1::ProfileSet& set);
// Sorts operators and curves into the canonical order ContentId hashes.
void Canonicalize(v1::ProfileSet* set);

// A job from vTrain's own configuration JSON (fields num_gpus,
// tensor/data/pipeline_parallel_size, global_batch_size, micro_batch_size,
// num_layers, hidden_size, num_attention_heads, max_length, vocab_size,
// use_checkpoint, use_gradient_bucket, ddp_bucket_size [MB],
// inter_node_bandwidth [Gb/s], intra_node_bandwidth [GB/s],
// pipeline_scheduling, node_size, gpu_name). Validated like a request;
// errors name the vTrain field.
absl::StatusOr<Job> JobFromVtrainConfig(const std::string& json);

// Protobuf JSON mapping, for files.
absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message);
absl::Status FromJson(const std::string& json, google::protobuf::Message* message);

}  // namespace vtrain::convert

#endif  // VTRAIN_PROTO_CONVERT_H_
