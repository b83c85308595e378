#include "core/graph/schedule.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace vtrain {
namespace {

// "F0 B0 F1 B1" for a stage's actions.
std::string Render(PipelineSchedule schedule, int64_t stage, int64_t stages, int64_t m) {
  std::string out;
  for (int64_t i = 0; i < 2 * m; ++i) {
    const PipelineAction a = ScheduleAction(schedule, stage, stages, m, i);
    absl::StrAppend(&out, i > 0 ? " " : "", a.forward ? "F" : "B", a.micro_batch);
  }
  return out;
}

// Every stage's 2m actions hold each forward and each backward exactly once,
// and forward j comes before backward j.
void CheckSchedule(PipelineSchedule schedule, int64_t stages, int64_t m) {
  for (int64_t s = 0; s < stages; ++s) {
    SCOPED_TRACE(absl::StrCat(ScheduleName(schedule), " p=", stages, " m=", m, " stage=", s));
    std::vector<int64_t> forward_at(m, -1), backward_at(m, -1);
    for (int64_t i = 0; i < 2 * m; ++i) {
      const PipelineAction a = ScheduleAction(schedule, s, stages, m, i);
      ASSERT_GE(a.micro_batch, 0);
      ASSERT_LT(a.micro_batch, m);
      std::vector<int64_t>& at = a.forward ? forward_at : backward_at;
      EXPECT_EQ(at[a.micro_batch], -1)
          << "action " << i << " repeats micro-batch " << a.micro_batch;
      at[a.micro_batch] = i;
    }
    for (int64_t j = 0; j < m; ++j) {
      EXPECT_GE(forward_at[j], 0) << "no forward " << j;
      EXPECT_GE(backward_at[j], 0) << "no backward " << j;
      EXPECT_LT(forward_at[j], backward_at[j]) << "micro-batch " << j;
    }
    // Forwards and backwards each run in micro-batch order.
    EXPECT_TRUE(std::is_sorted(forward_at.begin(), forward_at.end()));
    EXPECT_TRUE(std::is_sorted(backward_at.begin(), backward_at.end()));
  }
}

TEST(ScheduleActionTest, EveryPassExactlyOnceForwardBeforeBackward) {
  for (PipelineSchedule schedule : {PipelineSchedule::kGpipe, PipelineSchedule::k1F1B}) {
    for (int64_t stages : {1, 2, 3, 4, 8, 16}) {
      for (int64_t m : {1, 2, 3, 4, 7, 8, 16, 33}) CheckSchedule(schedule, stages, m);
    }
  }
}

TEST(ScheduleActionTest, GpipeRunsAllForwardsThenAllBackwards) {
  EXPECT_EQ(Render(PipelineSchedule::kGpipe, 0, 4, 3), "F0 F1 F2 B0 B1 B2");
  EXPECT_EQ(Render(PipelineSchedule::kGpipe, 3, 4, 3), "F0 F1 F2 B0 B1 B2");
}

TEST(ScheduleActionTest, OneF1BWarmUpIsMinOfRemainingStagesAndMicroBatches) {
  for (int64_t stages : {1, 2, 4, 8}) {
    for (int64_t m : {1, 2, 3, 8, 12}) {
      for (int64_t s = 0; s < stages; ++s) {
        SCOPED_TRACE(absl::StrCat("p=", stages, " m=", m, " stage=", s));
        // Forwards before the first backward.
        int64_t leading_forwards = 0;
        while (ScheduleAction(PipelineSchedule::k1F1B, s, stages, m, leading_forwards).forward) {
          ++leading_forwards;
        }
        const int64_t warmup = std::min(stages - s - 1, m);
        // After the warm-up the stage runs one more forward before its first
        // backward, unless the warm-up already ran all m.
        EXPECT_EQ(leading_forwards, warmup < m ? warmup + 1 : m);
      }
    }
  }
}

TEST(ScheduleActionTest, OneF1BGoldenOrders) {
  // p = 4, m = 6. Stage 0 warms up with 3 forwards, stage 3 with none.
  EXPECT_EQ(Render(PipelineSchedule::k1F1B, 0, 4, 6), "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  EXPECT_EQ(Render(PipelineSchedule::k1F1B, 1, 4, 6), "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5");
  EXPECT_EQ(Render(PipelineSchedule::k1F1B, 3, 4, 6), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
  // Fewer micro-batches than warm-up: it degenerates to GPipe.
  EXPECT_EQ(Render(PipelineSchedule::k1F1B, 0, 8, 2), "F0 F1 B0 B1");
}

TEST(ScheduleActionTest, OneF1BWithOneStageAlternates) {
  EXPECT_EQ(Render(PipelineSchedule::k1F1B, 0, 1, 4), "F0 B0 F1 B1 F2 B2 F3 B3");
  EXPECT_EQ(Render(PipelineSchedule::k1F1B, 0, 1, 1), "F0 B0");
}

// "F0.0 F1.0 ..." (micro-batch.chunk) for an interleaved stage's actions.
std::string RenderInterleaved(int64_t stage, int64_t stages, int64_t chunks, int64_t m) {
  std::string out;
  int64_t f = 0, b = 0;
  while (b < m * chunks) {
    const bool forward = InterleavedNextIsForward(stage, stages, chunks, m, f, b);
    const ChunkPass pass = InterleavedPass(forward, stages, chunks, forward ? f++ : b++);
    absl::StrAppend(&out, out.empty() ? "" : " ", forward ? "F" : "B", pass.micro_batch, ".",
                    pass.chunk);
  }
  return out;
}

TEST(InterleavedScheduleTest, MegatronsOrderForTwoStagesTwoChunks) {
  // Megatron-LM's schedule table with groups of p = 2 micro-batches: F
  // (0,c0) (1,c0) (0,c1) (1,c1) (2,c0) ...; backwards the last chunk first.
  // Warm-up: stage 0 2*(2-0-1) + (2-1)*2 = 4, stage 1 0 + 2 = 2.
  EXPECT_EQ(RenderInterleaved(0, 2, 2, 4),
            "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0");
  EXPECT_EQ(RenderInterleaved(1, 2, 2, 4),
            "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0");
  EXPECT_EQ(InterleavedWarmup(0, 4, 3, 8), 2 * 3 + 2 * 4);
  EXPECT_EQ(InterleavedWarmup(0, 4, 3, 2), 6);  // at most m * chunks
}

TEST(InterleavedScheduleTest, EveryChunkPassOnceAndTheWrapFifoMatchesBothEnds) {
  for (int64_t stages : {2, 3, 4}) {
    for (int64_t chunks : {2, 3}) {
      const int64_t m = 2 * stages;
      std::vector<int> seen(m * chunks, 0);
      std::vector<int64_t> sent, received;
      for (int64_t k = 0; k < m * chunks; ++k) {
        const ChunkPass pass = InterleavedPass(true, stages, chunks, k);
        ++seen[pass.micro_batch * chunks + pass.chunk];
        // The last stage sends chunk c < V-1 of micro-batch j; the first
        // receives it as chunk c + 1: the FIFO indices must agree.
        if (pass.chunk < chunks - 1) {
          sent.resize(
              std::max<size_t>(sent.size(), InterleavedWrapIndex(true, stages, chunks, k) + 1));
          sent[InterleavedWrapIndex(true, stages, chunks, k)] =
              pass.micro_batch * chunks + pass.chunk + 1;
        }
        if (pass.chunk > 0) {
          received.push_back(pass.micro_batch * chunks + pass.chunk);
          EXPECT_EQ(InterleavedWrapIndex(false, stages, chunks, k),
                    static_cast<int64_t>(received.size()) - 1);
        }
      }
      for (int n : seen) EXPECT_EQ(n, 1);
      EXPECT_EQ(sent, received);
    }
  }
}

}  // namespace
}  // namespace vtrain
