// Pipeline layouts: which decoder layers (and the embedding, the loss and the
// multi-token-prediction modules) each of a pipeline's p * v model chunks
// holds. Even when p * v divides the layers; otherwise as Megatron-Core's
// options lay them (--decoder-first/last-pipeline-num-layers,
// --account-for-embedding/loss-in-pipeline-split,
// --pipeline-model-parallel-layout). Pure functions: no I/O.
#ifndef VTRAIN_CORE_SPEC_PIPELINE_LAYOUT_H_
#define VTRAIN_CORE_SPEC_PIPELINE_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/spec/job.h"

namespace vtrain {

// One resolved chunk: decoder layers [first_layer, first_layer + num_layers).
struct ChunkLayers {
  int64_t first_layer = 0;
  int64_t num_layers = 0;
  int64_t mtp_layers = 0;
  bool embedding = false;
  bool loss = false;
};

// The most chunks a layout string may describe (p * v past this is refused
// by ValidateJob anyway).
inline constexpr int64_t kMaxLayoutChunks = 1 << 16;

// Parses Megatron-Core's layout notation: chunks separated by '|', in model
// order (chunk * p + stage); in a chunk 'E' the embedding, 't' a decoder
// layer, 'm' an MTP module, 'L' the output layer and loss; "X*N" repeats a
// token N times and "(...)*N" a group (which may hold '|'); commas and spaces
// separate tokens. "Et*3|(tt|)*29m|L" is DeepSeek-V3's 61 layers on 32
// chunks. Errors name `field`, the position and the fix.
absl::StatusOr<std::vector<ChunkContent>> ParsePipelineLayout(absl::string_view text,
                                                              absl::string_view field);

// The same notation for resolved chunks, runs of equal chunks grouped:
// "Et*2|(t*3|)*30t*2L".
std::string FormatPipelineLayout(const std::vector<ChunkLayers>& chunks);

// Appends one message per problem of plan.layout against the model and plan
// (naming plan.pipeline_layout, plan.first_stage_layers or
// plan.last_stage_layers, or model.num_layers when no layout exists).
// ValidateJob calls it once p, v and the layer count are valid.
void CheckPipelineLayout(const Job& job, std::vector<std::string>& problems);

// The chunks of a valid job, in model order (chunk * p + stage), p * v of
// them. With the layout unset: even when p * v divides the layers; else the
// embedding and the loss counted as a layer each (first and last chunk one
// layer lighter) when that divides, or the loss alone; else the middle chunks
// ceil(layers / (p * v)) each and the first and last chunk the rest. An end
// chunk may hold no decoder layer; a middle chunk holds at least one.
absl::StatusOr<std::vector<ChunkLayers>> ResolvePipelineLayout(const Job& job);

// Whether the job's chunks all hold the same number of layers.
bool IsEvenLayout(const std::vector<ChunkLayers>& chunks);

}  // namespace vtrain

#endif  // VTRAIN_CORE_SPEC_PIPELINE_LAYOUT_H_
