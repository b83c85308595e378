// The profile-set half of the bad-input catalogue: pushed sets with one
// defect each, and the parameter cases they include.
#include <cstdint>
#include <vector>

#include "tests/server/bad_input_cases.h"
#include "tests/server/server_testing.h"

namespace vtrain::server {

std::vector<Case<v1::ProfileSet>> ParamCases();

namespace {

// Replaces the set's bands with one empty band, at index 0, to fill in.
v1::ErrorBand* OnlyBand(v1::ProfileSet& set) {
  set.clear_error_bands();
  return set.add_error_bands();
}

}  // namespace

std::vector<Case<v1::ProfileSet>> PushCases() {
  using R = v1::ProfileSet;
  std::vector<Case<R>> cases = {
      {"no gpu", [](R& r) { r.set_gpu(""); }, kBad, "profile_set.gpu"},
      {"gpu without a datasheet",
       [](R& r) {
         r.set_gpu("mi300x");
         for (v1::OperatorProfile& op : *r.mutable_operators()) op.mutable_key()->clear_gpu();
       },
       kBad, "profile_set.gpu='mi300x' has no datasheet"},
      {"op unspecified",
       [](R& r) { r.mutable_operators(0)->mutable_key()->set_op(v1::OPERATOR_KIND_UNSPECIFIED); },
       kBad, "operators[0].key.op"},
      {"op unknown",
       [](R& r) {
         r.mutable_operators(0)->mutable_key()->set_op(static_cast<v1::OperatorKind>(77));
       },
       kBad, "operators[0].key.op"},
      {"dtype unknown",
       [](R& r) { r.mutable_operators(0)->mutable_key()->set_dtype(static_cast<v1::DType>(77)); },
       kBad, "operators[0].key.dtype"},
      {"no kernels", [](R& r) { r.mutable_operators(0)->clear_kernels(); }, kBad,
       "operators[0].kernels"},
      {"negative duration",
       [](R& r) { r.mutable_operators(0)->mutable_kernels(0)->set_duration_ns(-1); }, kBad,
       "operators[0].kernels[0]"},
      {"huge duration",
       [](R& r) { r.mutable_operators(0)->mutable_kernels(0)->set_duration_ns(int64_t{1} << 50); },
       kBad, "operators[0].kernels[0]"},
      {"negative gap", [](R& r) { r.mutable_operators(0)->mutable_kernels(0)->set_gap_ns(-1); },
       kBad, "operators[0].kernels[0]"},
      {"duplicate operator", [](R& r) { *r.add_operators() = r.operators(0); }, kBad, "duplicates"},
      {"scope unspecified",
       [](R& r) {
         auto* c = r.add_collectives();
         c->set_collective(v1::COLLECTIVE_ALL_REDUCE);
         c->set_ranks(8);
         c->add_points()->set_bytes(1);
       },
       kBad, "collectives[0].scope"},
      {"collective unknown",
       [](R& r) {
         auto* c = r.add_collectives();
         c->set_collective(static_cast<v1::Collective>(50));
         c->set_scope(v1::LINK_SCOPE_INTRA_NODE);
         c->set_ranks(8);
       },
       kBad, "collectives[0].collective"},
      {"one rank",
       [](R& r) {
         auto* c = r.add_collectives();
         c->set_collective(v1::COLLECTIVE_ALL_REDUCE);
         c->set_scope(v1::LINK_SCOPE_INTRA_NODE);
         c->set_ranks(1);
       },
       kBad, "collectives[0].ranks"},
      {"negative bytes",
       [](R& r) {
         auto* c = r.add_collectives();
         c->set_collective(v1::COLLECTIVE_ALL_REDUCE);
         c->set_scope(v1::LINK_SCOPE_INTRA_NODE);
         c->set_ranks(8);
         auto* p = c->add_points();
         p->set_bytes(-1);
         p->set_latency_ns(5);
       },
       kBad, "collectives[0].points"},
      {"no points",
       [](R& r) {
         auto* c = r.add_collectives();
         c->set_collective(v1::COLLECTIVE_ALL_REDUCE);
         c->set_scope(v1::LINK_SCOPE_INTRA_NODE);
         c->set_ranks(8);
       },
       kBad, "collectives[0].points"},
      {"band NaN",
       [](R& r) {
         v1::ErrorBand* b = OnlyBand(r);
         b->set_regime("single_node");
         b->set_error_low(kNan);
         b->set_error_high(0.1);
         b->set_coverage(0.9);
       },
       kBad, "error_bands[0]"},
      {"band reversed",
       [](R& r) {
         v1::ErrorBand* b = OnlyBand(r);
         b->set_regime("single_node");
         b->set_error_low(0.3);
         b->set_error_high(0.1);
         b->set_coverage(0.9);
       },
       kBad, "error_bands[0]"},
      {"band coverage",
       [](R& r) {
         v1::ErrorBand* b = OnlyBand(r);
         b->set_regime("single_node");
         b->set_error_low(-0.1);
         b->set_error_high(0.1);
         b->set_coverage(2);
       },
       kBad, "error_bands[0].coverage"},
      {"band rows",
       [](R& r) {
         v1::ErrorBand* b = OnlyBand(r);
         b->set_regime("single_node");
         b->set_error_low(-0.1);
         b->set_error_high(0.1);
         b->set_coverage(0.9);
         b->set_rows(-1);
       },
       kBad, "error_bands[0].rows"},
      {"band regime",
       [](R& r) {
         v1::ErrorBand* b = OnlyBand(r);
         b->set_error_low(-0.1);
         b->set_error_high(0.1);
         b->set_coverage(0.9);
       },
       kBad, "error_bands[0].regime"},
      {"forged id", [](R& r) { r.set_id("sha256:forged"); }, kBad, "profile_set.id"},
      // Out-of-range numbers are never stored (issue 28).
      {"negative hidden", [](R& r) { r.mutable_operators(0)->mutable_key()->set_hidden(-12288); },
       kBad, "key.hidden=-12288"},
      {"huge host_ns",
       [](R& r) { r.mutable_operators(0)->mutable_kernels(0)->set_host_ns(int64_t{1} << 62); },
       kBad, "host_ns"},
      {"huge ranks",
       [](R& r) {
         v1::CollectiveCurve* c = r.add_collectives();
         c->set_collective(v1::COLLECTIVE_ALL_REDUCE);
         c->set_scope(v1::LINK_SCOPE_INTRA_NODE);
         c->set_ranks(99'999'999);
       },
       kBad, "ranks=99999999 must be in [2, "},
  };
  for (Case<R>& c : ParamCases()) cases.push_back(std::move(c));
  return cases;
}

// Every analytical parameter, negative, NaN and absurdly large.
std::vector<Case<v1::ProfileSet>> ParamCases() {
  using R = v1::ProfileSet;
  std::vector<Case<R>> cases;
  const google::protobuf::Descriptor& d = *v1::AnalyticalParams::descriptor();
  for (int i = 0; i < d.field_count(); ++i) {
    const google::protobuf::FieldDescriptor* f = d.field(i);
    for (double v : {-1.0, kNan, 1e300}) {
      cases.push_back({f->name().c_str(),
                       [f, v](R& r) {
                         r.mutable_params()->GetReflection()->SetDouble(r.mutable_params(), f, v);
                       },
                       kBad, "profile_set.params."});
    }
  }
  return cases;
}

}  // namespace vtrain::server
