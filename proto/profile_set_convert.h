// Profile sets as vtrain.v1 messages: validation of a set from outside into
// core tables, the reverse, and the content id that names a set.
#ifndef VTRAIN_PROTO_PROFILE_SET_CONVERT_H_
#define VTRAIN_PROTO_PROFILE_SET_CONVERT_H_

#include <string>

#include "absl/status/statusor.h"
#include "core/profile/profile.h"
#include "vtrain/v1/vtrain.pb.h"

namespace vtrain::proto {

// The tables of a set. Validates every key, kernel and curve: INVALID_ARGUMENT
// naming the field path ("profile_set.operators[3].key.op") and the fix.
// The core set's id is the message's id; its name is the message's name.
absl::StatusOr<ProfileSet> ProfileSetFromProto(const v1::ProfileSet& set);
// A GPU's datasheet figures as the message a profile set carries them in.
void DatasheetToProto(const GpuSpec& gpu, v1::GpuDatasheet* d);
// The message of a set, canonically ordered (id copied, created_at unset).
v1::ProfileSet ProfileSetToProto(const ProfileSet& set);

// The parameters as a message, every field written out.
void ParamsToProto(const AnalyticalParams& params, v1::AnalyticalParams* out);

// The content hash of a set ("sha256:<hex>"): SHA-256 of its deterministic
// serialization without id and created_at, operators and curves sorted.
std::string ContentId(const v1::ProfileSet& set);
// Sorts operators and curves into the canonical order ContentId hashes.
void Canonicalize(v1::ProfileSet* set);

}  // namespace vtrain::proto

#endif  // VTRAIN_PROTO_PROFILE_SET_CONVERT_H_
