// vtrainctl trace: the simulated iteration as a Chrome trace / Perfetto JSON
// file (a track per stage and stream, a slice per task).
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/commands.h"
#include "client/job_flags.h"
#include "client/json_writer.h"
#include "client/measurements.h"
#include "common/flag_parser.h"
#include "core/engine/engine.h"
#include "core/graph/builder.h"
#include "core/profile/default_profiles.h"
#include "core/profile/lookup.h"

namespace vtrain::client {

int RunTrace(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  common::FlagParser flags("vtrainctl trace");
  AddJobFlags(flags);
  flags.AddValue("o", "FILE", "where to write the trace (default trace.json)");
  flags.AddSwitch("kernels", "one slice per CUDA kernel (default: one per merged pass)");
  flags.AddValue("max-tasks", "N", "refuse larger traces (default 2000000)");
  flags.AddSwitch("help", "show this help");
  // FlagParser reads -o as --o (common/flag_parser.h).
  if (absl::Status s = flags.Parse(args); !s.ok()) return Fail(err, "trace", s);
  if (flags.Switch("help")) {
    out << "usage: vtrainctl trace [job flags] [-o trace.json] [--kernels]\n\n"
           "Writes the simulated iteration in the Chrome trace event format: open it in\n"
           "https://ui.perfetto.dev or chrome://tracing to see the pipeline bubble, the\n"
           "exposed communication and each stage's passes. A process per pipeline stage,\n"
           "a thread per stream (compute, data_parallel).\n\n"
           "example:\n  vtrainctl trace --model gpt3-1.3b --gpus 16 --tp 2 --pp 4 --global-batch "
           "32 "
           "-o trace.json\n\nflags:\n"
        << flags.Usage();
    return common::kExitOk;
  }
  absl::StatusOr<Job> job = JobFromFlags(flags);
  if (!job.ok()) return Fail(err, "trace", job.status());
  absl::StatusOr<std::optional<int64_t>> max_tasks =
      flags.GetIntIn("max-tasks", 1, int64_t{1} << 40);
  if (!max_tasks.ok()) return Fail(err, "trace", max_tasks.status());
  const ProfileSet profiles = DefaultProfileSet(job->cluster.gpu);
  ProfileLookup lookup(profiles, job->cluster.gpu,
                       LinkBandwidths{job->cluster.intra_node_bandwidth_bytes_per_s,
                                      job->cluster.inter_node_bandwidth_bytes_per_s});
  BuildOptions build;
  build.granularity = flags.Switch("kernels") ? Granularity::kKernel : Granularity::kOperator;
  build.max_tasks = max_tasks->value_or(2'000'000);
  build.keep_notes = true;  // micro-batch, chunk, layers and bytes as slice args
  absl::StatusOr<IterationGraph> graph = BuildIterationGraph(*job, lookup, build);
  if (!graph.ok()) return Fail(err, "trace", graph.status());
  SimulationOptions sim;
  sim.keep_task_times = true;
  absl::StatusOr<SimulationResult> result = Simulate(graph->graph, sim);
  if (!result.ok()) return Fail(err, "trace", result.status());

  const TaskGraph& g = graph->graph;
  JsonWriter w;
  w.BeginObject();
  w.Key("displayTimeUnit").String("ms");
  w.Key("traceEvents").BeginArray();
  // Names: a process per stage, a thread per stream ("stage3/compute").
  for (StreamId s = 0; s < g.num_streams(); ++s) {
    const std::string& name = g.stream_name(s);
    const size_t slash = name.find('/');
    const int64_t stage = std::stoll(name.substr(5, slash - 5));
    if (name.substr(slash + 1) == "compute") {
      w.BeginObject().Key("name").String("process_name").Key("ph").String("M");
      w.Key("pid").Int(stage).Key("args").BeginObject().Key("name").String(
          absl::StrCat("stage ", stage));
      w.EndObject().EndObject();
    }
    w.BeginObject().Key("name").String("thread_name").Key("ph").String("M");
    w.Key("pid").Int(stage).Key("tid").Int(s).Key("args").BeginObject().Key("name").String(
        name.substr(slash + 1));
    w.EndObject().EndObject();
  }
  for (int64_t id = 0; id < g.num_tasks(); ++id) {
    const Task& t = g.task(static_cast<TaskId>(id));
    const std::string& name = g.stream_name(t.stream);
    const int64_t stage = std::stoll(name.substr(5, name.find('/') - 5));
    const double end_us = static_cast<double>(result->finish_ns[id]) * 1e-3;
    const double dur_us = static_cast<double>(t.duration_ns) * 1e-3;
    w.BeginObject();
    w.Key("name").String(g.labels()[t.label]);
    w.Key("ph").String("X");
    w.Key("ts").Double(end_us - dur_us);
    w.Key("dur").Double(dur_us);
    w.Key("pid").Int(stage);
    w.Key("tid").Int(t.stream);
    if (static_cast<size_t>(id) < graph->notes.size()) {
      // What the slice is: Perfetto shows these under "Arguments".
      const TaskNote& n = graph->notes[static_cast<size_t>(id)];
      w.Key("args").BeginObject();
      if (n.micro_batch >= 0) w.Key("micro_batch").Int(n.micro_batch);
      if (n.chunk >= 0) w.Key("chunk").Int(n.chunk);
      if (n.num_layers > 0) {
        w.Key("layers").String(absl::StrCat(n.first_layer, "-", n.first_layer + n.num_layers - 1));
      }
      if (n.bytes > 0) w.Key("bytes").Double(n.bytes);
      w.EndObject();
    }
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  const std::string path = flags.Get("o").value_or("trace.json");
  if (absl::Status s = common::WriteFile(path, w.str() + "\n"); !s.ok())
    return Fail(err, "trace", s);
  out << absl::StrFormat("wrote %d slices of a %.3f ms iteration to %s\n", g.num_tasks(),
                         static_cast<double>(result->makespan_ns) * 1e-6, path);
  return common::kExitOk;
}

}  // namespace vtrain::client
