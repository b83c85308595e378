#include "tests/testing/profile_sets.h"

#include "core/profile/default_profiles.h"
#include "proto/profile_set_convert.h"

namespace vtrain::testing {

v1::ProfileSet MeasuredSet(int64_t duration_ns) {
  constexpr char kGpu[] = "a100-sxm4-80gb";
  v1::ProfileSet set;
  set.set_name("test-set");
  set.set_gpu(kGpu);
  const v1::ProfileSet builtin = proto::ProfileSetToProto(DefaultProfileSet(*GpuByName(kGpu)));
  *set.mutable_params() = builtin.params();
  *set.mutable_error_bands() = builtin.error_bands();
  v1::OperatorProfile* op = set.add_operators();
  op->mutable_key()->set_op(v1::OPERATOR_KIND_ATTENTION_FWD);
  op->mutable_key()->set_dtype(v1::DTYPE_FP16);
  op->mutable_key()->set_hidden(2048);
  op->mutable_key()->set_heads(16);
  op->mutable_key()->set_seq(2048);
  op->mutable_key()->set_micro_batch(1);
  op->mutable_key()->set_tensor_parallel(2);
  // GPT keys are unfused unless marked; the presets now run flash.
  op->mutable_key()->set_attention_impl(v1::ATTENTION_IMPL_FLASH);
  v1::Kernel* k = op->add_kernels();
  k->set_name("gemm");
  k->set_duration_ns(duration_ns);
  k->set_gap_ns(1000);
  return set;
}

v1::ProfileSet PartialSet(int64_t duration_ns) {
  v1::ProfileSet set = MeasuredSet(duration_ns);
  set.set_name("partial-set");
  set.clear_error_bands();
  return set;
}

}  // namespace vtrain::testing
