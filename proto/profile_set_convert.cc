#include "proto/profile_set_convert.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/profile/default_profiles.h"
#include "core/util/status_macros.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/unknown_field_set.h"
#include "proto/enum_convert.h"
#include "proto/sha256.h"

namespace vtrain::proto {
namespace {

// The AnalyticalParams message field of a core parameter: the two share names
// (a test checks every one), so one table (AnalyticalParamInfos) serves both.
const google::protobuf::FieldDescriptor& ParamField(const ParamInfo& info) {
  return *v1::AnalyticalParams::descriptor()->FindFieldByName(info.name);
}

// The parameters of a set: each field given is taken, each left out takes the
// built-in default explicitly (never proto3's zero).
AnalyticalParams ParamsFromProto(const v1::AnalyticalParams& in) {
  AnalyticalParams params = DefaultAnalyticalParams();
  const google::protobuf::Reflection& r = *in.GetReflection();
  for (const ParamInfo& info : AnalyticalParamInfos()) {
    const google::protobuf::FieldDescriptor& f = ParamField(info);
    if (r.HasField(in, &f)) params.*(info.member) = r.GetDouble(in, &f);
  }
  return params;
}

}  // namespace

void ParamsToProto(const AnalyticalParams& params, v1::AnalyticalParams* out) {
  const google::protobuf::Reflection& r = *out->GetReflection();
  for (const ParamInfo& info : AnalyticalParamInfos()) {
    r.SetDouble(out, &ParamField(info), params.*(info.member));
  }
}

namespace {

// Operators sort by their key's deterministic serialization.
std::string KeyText(const v1::OperatorKey& k) {
  std::string bytes;
  google::protobuf::io::StringOutputStream stream(&bytes);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  k.SerializeToCodedStream(&coded);
  coded.Trim();
  return bytes;
}

}  // namespace

namespace {

// The operator of a key written by the first agents, which sent it as text
// in field 3 ("attention_fwd"; now `reserved 3`, the enum is field 12): the
// parser keeps it as an unknown field. Empty when there is none.
std::string LegacyOperatorText(const v1::OperatorKey& k) {
  const google::protobuf::UnknownFieldSet& unknown = k.GetReflection()->GetUnknownFields(k);
  for (int i = 0; i < unknown.field_count(); ++i) {
    const google::protobuf::UnknownField& f = unknown.field(i);
    if (f.number() == 3 && f.type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED) {
      return f.length_delimited();
    }
  }
  return "";
}

// One operator key of a set, every field checked against the ranges a job
// may have; `where` names it in errors, `gpu` is the set's GPU.
absl::StatusOr<OperatorKey> KeyFromProto(const v1::OperatorKey& k, const std::string& where,
                                         const std::string& gpu) {
  if (k.op() == v1::OPERATOR_KIND_UNSPECIFIED) {
    if (const std::string legacy = LegacyOperatorText(k); !legacy.empty()) {
      absl::StatusOr<OperatorKind> kind = ParseOperatorKind(legacy);
      if (!kind.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ".key.op: '", legacy, "' (sent as text by an older agent) is not an operator"));
      }
      v1::OperatorKey upgraded = k;
      upgraded.set_op(ToProto(*kind));
      upgraded.GetReflection()->MutableUnknownFields(&upgraded)->Clear();
      return KeyFromProto(upgraded, where, gpu);
    }
  }
  VTRAIN_ASSIGN_OR_RETURN(OperatorKind kind,
                          RequiredFromProto(k.op(), absl::StrCat(where, ".key.op")));
  VTRAIN_ASSIGN_OR_RETURN(DType dtype,
                          FromProtoOr(k.dtype(), DType::kFp16, absl::StrCat(where, ".key.dtype")));
  VTRAIN_ASSIGN_OR_RETURN(Architecture arch, FromProtoOr(k.arch(), Architecture::kGpt,
                                                         absl::StrCat(where, ".key.arch")));
  // Every dimension non-negative and within the ranges a job may have
  // (core/spec/job.cc), so a stored key can never be a shape no job has.
  const struct {
    const char* name;
    int64_t value, max;
  } dims[] = {{"hidden", k.hidden(), 1 << 18},
              {"heads", k.heads(), 1 << 14},
              {"ffn", k.ffn(), 1 << 20},
              {"seq", k.seq(), 1 << 20},
              {"micro_batch", k.micro_batch(), 1 << 16},
              {"tensor_parallel", k.tensor_parallel(), 1 << 20},
              {"vocab", k.vocab(), 1 << 24},
              {"num_parameters", k.num_parameters(), int64_t{1} << 50},
              {"context_parallel", k.context_parallel(), 1 << 20},
              {"head_dim", k.head_dim(), 4096},
              {"mla_q_lora", k.mla_q_lora(), 1 << 16},
              {"mla_kv_lora", k.mla_kv_lora(), 1 << 16},
              {"mla_rope", k.mla_rope(), 4096},
              {"mla_v", k.mla_v(), 4096},
              {"experts", k.experts(), 1 << 16},
              {"top_k", k.top_k(), 1 << 16},
              {"shared_ffn", k.shared_ffn(), 1 << 26},
              {"expert_parallel", k.expert_parallel(), 1 << 20},
              {"expert_tensor_parallel", k.expert_tensor_parallel(), 1 << 20},
              {"expert_load_permille", k.expert_load_permille(), 64000}};
  for (const auto& d : dims) {
    if (d.value < 0 || d.value > d.max) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".key.", d.name, "=", d.value, " must be in [0, ", d.max, "]"));
    }
  }
  if (k.kv_heads() < 0 || k.kv_heads() > k.heads()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ".key.kv_heads=", k.kv_heads(),
                                                   " must be in [0, key.heads=", k.heads(), "]"));
  }
  OperatorKey key =
      MakeOperatorKey(k.gpu().empty() ? gpu : k.gpu(), dtype, kind, k.hidden(), k.heads(), k.ffn(),
                      k.seq(), k.micro_batch(), std::max<int64_t>(1, k.tensor_parallel()),
                      k.vocab(), k.num_parameters(), arch, k.kv_heads());
  if (k.context_parallel() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(where,
                                                   ".key.context_parallel=", k.context_parallel(),
                                                   " must be 0 (meaning 1) or positive"));
  }
  key = WithParallelSplits(std::move(key), k.sequence_parallel(),
                           std::max<int64_t>(1, k.context_parallel()), k.attention_core_only());
  LayerShape shape;
  shape.head_dim = k.head_dim();
  shape.mla = {k.mla_q_lora(), k.mla_kv_lora(), k.mla_rope(), k.mla_v()};
  shape.experts = k.experts();
  shape.top_k = k.top_k();
  shape.shared_ffn = k.shared_ffn();
  shape.expert_parallel = std::max<int64_t>(1, k.expert_parallel());
  shape.expert_tensor_parallel = std::max<int64_t>(1, k.expert_tensor_parallel());
  shape.expert_load_permille = k.expert_load_permille() == 0 ? 1000 : k.expert_load_permille();
  if (k.attention_impl() != v1::ATTENTION_IMPL_UNSPECIFIED) {
    VTRAIN_ASSIGN_OR_RETURN(shape.attention_impl,
                            FromProtoOr(k.attention_impl(), AttentionImpl::kFlash,
                                        absl::StrCat(where, ".key.attention_impl")));
  }
  VTRAIN_ASSIGN_OR_RETURN(shape.fp8_recipe, FromProtoOr(k.fp8_recipe(), Fp8Recipe::kDelayed,
                                                        absl::StrCat(where, ".key.fp8_recipe")));
  key = WithLayerShape(std::move(key), shape);
  if (shape.fp8_recipe != Fp8Recipe::kDelayed && !HasFp8Linears(key)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ".key.fp8_recipe applies to fp8 attention, MLP and MoE keys only"));
  }
  return key;
}

}  // namespace

namespace {

// profile_set.datasheet: required for a GPU this build has no datasheet for,
// refused for one it has (the build's figures are the GPU's).
absl::Status DatasheetFromProto(const v1::ProfileSet& in, ProfileSet& set) {
  const bool known = GpuByName(set.gpu).ok();
  if (known && in.has_datasheet()) {
    return absl::InvalidArgumentError(
        absl::StrCat("profile_set.datasheet is given for gpu '", set.gpu,
                     "', which this build has figures for; leave profile_set.datasheet out"));
  }
  if (known) return absl::OkStatus();
  if (!in.has_datasheet()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "profile_set.gpu='", set.gpu,
        "' has no datasheet in this build, so no prediction could use the set; add "
        "profile_set.datasheet with the GPU's peak_bf16_flops_per_s (or peak_fp16), "
        "peak_fp8_flops_per_s (0: none), hbm_bandwidth_bytes_per_s, memory_bytes, num_sms, "
        "default_intra_node_bandwidth_bytes_per_s and default_inter_node_bandwidth_bytes_per_s, "
        "or use one of the known GPUs: ",
        absl::StrJoin(GpuNames(), ", ")));
  }
  const v1::GpuDatasheet& d = in.datasheet();
  GpuSpec gpu;
  gpu.name = set.gpu;
  gpu.peak_fp16_flops_per_s = d.peak_fp16_flops_per_s();
  gpu.peak_bf16_flops_per_s = d.peak_bf16_flops_per_s();
  gpu.peak_fp8_flops_per_s = d.peak_fp8_flops_per_s();
  gpu.hbm_bandwidth_bytes_per_s = d.hbm_bandwidth_bytes_per_s();
  gpu.memory_bytes = d.memory_bytes();
  gpu.num_sms = d.num_sms();
  gpu.default_intra_node_bandwidth_bytes_per_s = d.default_intra_node_bandwidth_bytes_per_s();
  gpu.default_inter_node_bandwidth_bytes_per_s = d.default_inter_node_bandwidth_bytes_per_s();
  VTRAIN_RETURN_IF_ERROR(CheckGpuDatasheet(gpu, "profile_set.datasheet"));
  set.datasheet = std::move(gpu);
  return absl::OkStatus();
}

}  // namespace

void DatasheetToProto(const GpuSpec& gpu, v1::GpuDatasheet* d) {
  d->set_peak_fp16_flops_per_s(gpu.peak_fp16_flops_per_s);
  d->set_peak_bf16_flops_per_s(gpu.peak_bf16_flops_per_s);
  d->set_peak_fp8_flops_per_s(gpu.peak_fp8_flops_per_s);
  d->set_hbm_bandwidth_bytes_per_s(gpu.hbm_bandwidth_bytes_per_s);
  d->set_memory_bytes(gpu.memory_bytes);
  d->set_num_sms(gpu.num_sms);
  d->set_default_intra_node_bandwidth_bytes_per_s(gpu.default_intra_node_bandwidth_bytes_per_s);
  d->set_default_inter_node_bandwidth_bytes_per_s(gpu.default_inter_node_bandwidth_bytes_per_s);
}

absl::StatusOr<ProfileSet> ProfileSetFromProto(const v1::ProfileSet& in) {
  ProfileSet set;
  set.name = in.name();
  set.id = in.id();
  set.gpu = in.gpu();
  if (set.gpu.empty()) return absl::InvalidArgumentError("profile_set.gpu is required");
  VTRAIN_RETURN_IF_ERROR(DatasheetFromProto(in, set));
  set.provenance = in.provenance().note();
  set.params = ParamsFromProto(in.params());
  for (int i = 0; i < in.operators_size(); ++i) {
    const v1::OperatorProfile& op = in.operators(i);
    const std::string where = absl::StrCat("profile_set.operators[", i, "]");
    VTRAIN_ASSIGN_OR_RETURN(OperatorKey key, KeyFromProto(op.key(), where, set.gpu));
    OperatorProfile profile;
    profile.fidelity = Fidelity::kMeasured;
    if (op.kernels_size() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".kernels is empty"));
    }
    for (int j = 0; j < op.kernels_size(); ++j) {
      const v1::Kernel& kernel = op.kernels(j);
      constexpr int64_t kMaxNs = int64_t{1} << 40;  // 18 minutes: no kernel takes longer
      if (kernel.duration_ns() < 0 || kernel.gap_ns() < 0 || kernel.host_ns() < 0 ||
          kernel.duration_ns() > kMaxNs || kernel.gap_ns() > kMaxNs || kernel.host_ns() > kMaxNs) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ".kernels[", j, "]: duration_ns, gap_ns and host_ns must be in [0, 2^40]"));
      }
      profile.kernels.push_back(
          {kernel.name(), kernel.duration_ns(), kernel.gap_ns(), kernel.host_ns()});
    }
    if (!set.operators.emplace(key, std::move(profile)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".key duplicates an earlier operator (", key.ToString(), ")"));
    }
  }
  for (int i = 0; i < in.collectives_size(); ++i) {
    const v1::CollectiveCurve& c = in.collectives(i);
    const std::string where = absl::StrCat("profile_set.collectives[", i, "]");
    VTRAIN_ASSIGN_OR_RETURN(Collective collective,
                            RequiredFromProto(c.collective(), absl::StrCat(where, ".collective")));
    VTRAIN_ASSIGN_OR_RETURN(LinkScope scope,
                            RequiredFromProto(c.scope(), absl::StrCat(where, ".scope")));
    if (c.ranks() < 2 || c.ranks() > (1 << 24)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".ranks=", c.ranks(), " must be in [2, ", 1 << 24, "]"));
    }
    std::vector<CollectivePoint> points;
    for (const v1::CollectivePoint& p : c.points()) points.push_back({p.bytes(), p.latency_ns()});
    absl::StatusOr<CollectiveCurve> curve = CollectiveCurve::Create(std::move(points));
    if (!curve.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".points: ", curve.status().message()));
    }
    CollectiveKey key{c.gpu().empty() ? set.gpu : c.gpu(), scope, collective, c.ranks()};
    set.collectives.insert_or_assign(key, *std::move(curve));
  }
  for (const v1::ErrorBand& b : in.error_bands()) {
    set.error_bands.push_back({b.regime(), b.error_low(), b.error_high(), b.coverage(), b.rows()});
  }
  VTRAIN_RETURN_IF_ERROR(ValidateProfileSetValues(set));
  return set;
}

v1::ProfileSet ProfileSetToProto(const ProfileSet& set) {
  v1::ProfileSet out;
  out.set_id(set.id);
  out.set_name(set.name);
  out.set_gpu(set.gpu);
  out.mutable_provenance()->set_note(set.provenance);
  if (set.datasheet.has_value()) DatasheetToProto(*set.datasheet, out.mutable_datasheet());
  ParamsToProto(set.params, out.mutable_params());
  for (const auto& [key, profile] : set.operators) {
    v1::OperatorProfile* op = out.add_operators();
    v1::OperatorKey* k = op->mutable_key();
    k->set_gpu(key.gpu);
    k->set_dtype(ToProto(key.dtype));
    k->set_op(ToProto(key.op));
    k->set_hidden(key.hidden);
    k->set_heads(key.heads);
    k->set_ffn(key.ffn);
    k->set_seq(key.seq);
    k->set_micro_batch(key.micro_batch);
    k->set_tensor_parallel(key.tensor_parallel);
    k->set_vocab(key.vocab);
    k->set_num_parameters(key.num_parameters);
    if (key.arch != Architecture::kGpt) k->set_arch(ToProto(key.arch));
    k->set_kv_heads(key.kv_heads);
    k->set_sequence_parallel(key.sequence_parallel);
    if (key.context_parallel != 1) k->set_context_parallel(key.context_parallel);
    k->set_attention_core_only(key.attention_core_only);
    if (key.NonDefaultAttention()) k->set_attention_impl(ToProto(key.attention_impl));
    if (key.fp8_recipe != Fp8Recipe::kDelayed) k->set_fp8_recipe(ToProto(key.fp8_recipe));
    k->set_head_dim(key.head_dim);
    k->set_mla_q_lora(key.mla_q_lora);
    k->set_mla_kv_lora(key.mla_kv_lora);
    k->set_mla_rope(key.mla_rope);
    k->set_mla_v(key.mla_v);
    k->set_experts(key.experts);
    k->set_top_k(key.top_k);
    k->set_shared_ffn(key.shared_ffn);
    if (key.experts > 0) {
      k->set_expert_parallel(key.expert_parallel);
      k->set_expert_tensor_parallel(key.expert_tensor_parallel);
      k->set_expert_load_permille(key.expert_load_permille);
    }
    for (const KernelRecord& kr : profile.kernels) {
      v1::Kernel* kernel = op->add_kernels();
      kernel->set_name(kr.name);
      kernel->set_duration_ns(kr.duration_ns);
      kernel->set_gap_ns(kr.gap_ns);
      kernel->set_host_ns(kr.host_ns);
    }
  }
  for (const auto& [key, curve] : set.collectives) {
    v1::CollectiveCurve* c = out.add_collectives();
    c->set_gpu(key.gpu);
    c->set_scope(ToProto(key.scope));
    c->set_collective(ToProto(key.collective));
    c->set_ranks(key.ranks);
    for (const CollectivePoint& p : curve.points()) {
      v1::CollectivePoint* point = c->add_points();
      point->set_bytes(p.bytes);
      point->set_latency_ns(p.latency_ns);
    }
  }
  for (const ErrorBand& b : set.error_bands) {
    v1::ErrorBand* band = out.add_error_bands();
    band->set_regime(b.regime);
    band->set_error_low(b.error_low);
    band->set_error_high(b.error_high);
    band->set_coverage(b.coverage);
    band->set_rows(b.rows);
  }
  Canonicalize(&out);
  return out;
}

void Canonicalize(v1::ProfileSet* set) {
  std::sort(set->mutable_operators()->begin(), set->mutable_operators()->end(),
            [](const v1::OperatorProfile& a, const v1::OperatorProfile& b) {
              return KeyText(a.key()) < KeyText(b.key());
            });
  std::sort(set->mutable_collectives()->begin(), set->mutable_collectives()->end(),
            [](const v1::CollectiveCurve& a, const v1::CollectiveCurve& b) {
              return std::make_tuple(a.gpu(), a.scope(), a.collective(), a.ranks()) <
                     std::make_tuple(b.gpu(), b.scope(), b.collective(), b.ranks());
            });
}

std::string ContentId(const v1::ProfileSet& set) {
  v1::ProfileSet content = set;
  content.clear_id();
  content.clear_created_at();
  Canonicalize(&content);
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    content.SerializeToCodedStream(&coded);
  }
  return absl::StrCat("sha256:", Sha256Hex(bytes));
}

}  // namespace vtrain::proto
