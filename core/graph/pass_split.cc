// The split of the backward pass into input and weight gradients for the
// schedules that run them apart (pass_templates.h).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/graph/pass_templates.h"
#include "core/spec/model.h"

namespace vtrain::internal {

double AttentionWeightShare(const ModelSpec& model) {
  // By FLOPs per token: a linear layer's backward is a data-gradient and a
  // weight-gradient GEMM of equal FLOPs; the attention core has no weights,
  // and its backward takes about 2.5 times its forward's FLOPs
  // (FlashAttention-2's five matmuls to two; causal halves both).
  const double linear = 2 * AttentionParameterCount(model);
  const double core = 2 * static_cast<double>(model.seq_len) *
                      static_cast<double>(model.num_heads * model.head_width());
  return linear / (2 * linear + 2.5 * core);
}

void SplitWeightGradient(StageTemplates& s, double weight_ns, int32_t input_label,
                         int32_t weight_label) {
  int64_t compute = 0;
  for (const Segment& seg : s.backward.segments) {
    for (const Item& i : seg.items) {
      if (i.kind == TaskKind::kCompute) compute += i.duration_ns;
    }
  }
  // W is at most the pass's compute (a profile may price operators apart).
  // The same whole nanoseconds leave B at either granularity, so kernel and
  // operator graphs keep the same makespan: each compute item gives its
  // share of what is left, the last one the rest.
  const int64_t w = std::llround(std::clamp(weight_ns, 0.0, static_cast<double>(compute)));
  s.input_grad = s.backward;
  int64_t left = w, rest = compute;
  for (Segment& seg : s.input_grad.segments) {
    for (Item& i : seg.items) {
      if (i.kind != TaskKind::kCompute || rest <= 0) continue;
      const int64_t take =
          std::min<int64_t>(i.duration_ns, std::llround(static_cast<double>(left) *
                                                        static_cast<double>(i.duration_ns) /
                                                        static_cast<double>(rest)));
      rest -= i.duration_ns;
      i.duration_ns -= take;
      left -= take;
      if (s.backward.NumItems() == 1) i.label = input_label;  // a merged pass
    }
  }
  // W: one task holding what B gave up, so B + W is the backward.
  s.weight_grad = ActionTemplate{};
  s.weight_grad.segments.push_back(
      Segment{{Item{w - left, 0, weight_label, TaskKind::kCompute, 0}}, 0});
}

}  // namespace vtrain::internal
