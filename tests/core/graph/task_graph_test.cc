#include "core/graph/task_graph.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace vtrain {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(TaskGraphTest, TasksStreamsAndParents) {
  TaskGraph g;
  const StreamId a = g.AddStream("stage0/compute");
  const StreamId b = g.AddStream("stage0/pipeline");
  EXPECT_EQ(a, 0);
  EXPECT_EQ(b, 1);
  const int32_t fwd = g.AddLabel("forward");
  const TaskId t0 = g.AddTask(a, 100, 5, TaskKind::kCompute, fwd, {});
  const TaskId t1 = g.AddTask(b, 7, 0, TaskKind::kPipeline, fwd, {t0});
  const TaskId t2 = g.AddTask(a, 3, 0, TaskKind::kCompute, fwd, {t0, t1});
  EXPECT_EQ(t0, 0);
  EXPECT_EQ(t1, 1);
  EXPECT_EQ(t2, 2);
  EXPECT_EQ(g.num_tasks(), 3);
  EXPECT_EQ(g.num_streams(), 2);
  EXPECT_EQ(g.stream_name(b), "stage0/pipeline");
  EXPECT_THAT(g.parents(t0), IsEmpty());
  EXPECT_THAT(g.parents(t1), ElementsAre(t0));
  EXPECT_THAT(g.parents(t2), ElementsAre(t0, t1));
  EXPECT_EQ(g.task(t1).duration_ns, 7);
  EXPECT_EQ(g.task(t0).gap_ns, 5);
  EXPECT_EQ(g.task(t1).kind, TaskKind::kPipeline);
  EXPECT_EQ(g.task(t2).stream, a);
  EXPECT_GT(g.MemoryBytes(), 0);
}

TEST(TaskGraphTest, LabelsAreInterned) {
  TaskGraph g;
  const int32_t a = g.AddLabel("gemm");
  const int32_t b = g.AddLabel("softmax");
  EXPECT_EQ(g.AddLabel("gemm"), a);
  EXPECT_NE(a, b);
  EXPECT_THAT(g.labels(), ElementsAre("gemm", "softmax"));
}

TEST(TaskGraphDeathTest, ParentsMustAlreadyExist) {
  TaskGraph g;
  const StreamId s = g.AddStream("s");
  const TaskId p[] = {3};
  EXPECT_DEATH(g.AddTask(s, 1, 0, TaskKind::kCompute, 0, p), "VTRAIN_CHECK");
}

TEST(TaskGraphDeathTest, StreamMustExist) {
  TaskGraph g;
  EXPECT_DEATH(g.AddTask(0, 1, 0, TaskKind::kCompute, 0, {}), "VTRAIN_CHECK");
}

}  // namespace
}  // namespace vtrain
