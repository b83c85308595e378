// Importers of existing measurements into profile sets: nccl-tests output
// (collective curves) and kernel traces of the vTrain paper's CUPTI profiler
// (operator kernel tables). Pure functions over text; no GPU needed.
#ifndef VTRAIN_PROFILER_AGENT_IMPORTERS_H_
#define VTRAIN_PROFILER_AGENT_IMPORTERS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/profile/profile.h"

namespace vtrain::agent {

// One collective curve from nccl-tests output (times in us, or ns when the
// header says "(ns)"), as a profile set for `gpu`.
absl::StatusOr<ProfileSet> ImportNcclTests(absl::string_view text, absl::string_view source,
                                           const std::string& gpu, int64_t ranks, LinkScope scope,
                                           Collective collective);

// The rank count of an nccl-tests run: the number of "#  Rank N ..." device
// lines it printed, else its "nGpus N" header, else "<N>gpu" in the file
// name (allreduce_8gpu.txt); nullopt when none says.
std::optional<int64_t> InferNcclRanks(absl::string_view text, absl::string_view file_name);

// The shape a trace was recorded at (vTrain names its files
// trace_<hidden>_<t>_<micro-batch>).
struct TraceShape {
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t ffn = 0;  // 0: 4 x hidden
  int64_t seq = 0;
  int64_t micro_batch = 0;
  int64_t tensor_parallel = 1;
  int64_t vocab = 50257;
  DType dtype = DType::kFp16;
};

// Operator kernel tables from a vTrain CUPTI trace: CSV lines
// start_ns,duration_ns,TYPE,...; RUNTIME/DRIVER lines carry the correlation
// id last, KERNEL lines the quoted name 4th and the correlation id last, and
// TIMESTAMP lines the quoted marker "forward|backward|WU start|end NAME". A
// kernel belongs to the marker section its launch's correlation id was
// issued in. Sections map to operators: embeddings -> embedding_fwd/bwd;
// transformer -> attention_fwd/bwd with the whole layer (mlp_fwd/bwd hold
// one zero-time kernel, since the trace does not split the layer);
// layernorm + logit -> logit_fwd/bwd; loss -> loss_fwd. Gaps are the
// distances between consecutive kernels of a section.
absl::StatusOr<ProfileSet> ImportVtrainTrace(absl::string_view text, absl::string_view source,
                                             const std::string& gpu, const TraceShape& shape);

}  // namespace vtrain::agent

#endif  // VTRAIN_PROFILER_AGENT_IMPORTERS_H_
