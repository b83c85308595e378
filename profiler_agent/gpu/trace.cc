#include "profiler_agent/gpu/trace.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>
#include <unordered_map>

namespace vtrain::gpu {

int64_t Median(std::vector<int64_t> values) {
  if (values.empty()) return 0;
  const size_t mid = (values.size() - 1) / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  return values[mid];
}

namespace {

// Per thread, indices into Trace::ranges sorted by start.
using RangesByThread = std::unordered_map<uint64_t, std::vector<size_t>>;

// The kernels attributed to each range (indexed like Trace::ranges).
using KernelsPerRange = std::vector<std::vector<const KernelActivity*>>;

// One range of an operator: its kernels by GPU start time and their names.
struct Instance {
  std::vector<const KernelActivity*> kernels;
  std::vector<std::string> sequence;
};

// Groups the terminated ranges by thread, each thread's sorted by start.
RangesByThread SortRangesByThread(const Trace& trace) {
  RangesByThread threads;
  for (size_t i = 0; i < trace.ranges.size(); ++i) {
    if (trace.ranges[i].end_ns < trace.ranges[i].start_ns) continue;  // unterminated
    threads[trace.ranges[i].thread].push_back(i);
  }
  for (auto& [thread, by_start] : threads) {
    std::sort(by_start.begin(), by_start.end(), [&](size_t a, size_t b) {
      return trace.ranges[a].start_ns < trace.ranges[b].start_ns;
    });
  }
  return threads;
}

// The innermost range containing `time` on `thread`: of the ranges that
// started at or before it, the latest-started one that has not ended
// (properly nested ranges make that the innermost). -1 if none.
int64_t InnermostRange(const Trace& trace, const RangesByThread& threads, uint64_t thread,
                       uint64_t time) {
  auto it = threads.find(thread);
  if (it == threads.end()) return -1;
  const std::vector<size_t>& v = it->second;
  auto pos = std::upper_bound(v.begin(), v.end(), time,
                              [&](uint64_t t, size_t r) { return t < trace.ranges[r].start_ns; });
  while (pos != v.begin()) {
    --pos;
    if (trace.ranges[*pos].end_ns >= time) return static_cast<int64_t>(*pos);
  }
  return -1;
}

// Attributes every kernel to the innermost range containing its launch;
// counts the ones no range contains in *unattributed.
KernelsPerRange AttributeKernels(const Trace& trace, int64_t* unattributed) {
  std::unordered_map<uint32_t, const LaunchActivity*> launch_of;
  launch_of.reserve(trace.launches.size());
  for (const LaunchActivity& l : trace.launches) launch_of[l.correlation] = &l;
  const RangesByThread threads = SortRangesByThread(trace);

  KernelsPerRange per_range(trace.ranges.size());
  for (const KernelActivity& k : trace.kernels) {
    auto l = launch_of.find(k.correlation);
    const int64_t r = l == launch_of.end()
                          ? -1
                          : InnermostRange(trace, threads, l->second->thread, l->second->start_ns);
    if (r < 0) {
      ++*unattributed;
    } else {
      per_range[static_cast<size_t>(r)].push_back(&k);
    }
  }
  return per_range;
}

// Operator names in order of first appearance (by range start time), and
// each one's ranges that launched kernels, in start order.
void GroupRangesByOperator(const Trace& trace, const KernelsPerRange& per_range,
                           std::vector<std::string>* names,
                           std::map<std::string, std::vector<size_t>>* instances) {
  std::vector<size_t> order(trace.ranges.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return trace.ranges[a].start_ns < trace.ranges[b].start_ns;
  });
  for (size_t r : order) {
    if (per_range[r].empty()) continue;
    const std::string& name = trace.ranges[r].name;
    if (instances->find(name) == instances->end()) names->push_back(name);
    (*instances)[name].push_back(r);
  }
}

// The instances of the ranges `ranges`, each's kernels sorted by GPU start.
std::vector<Instance> MakeInstances(const std::vector<size_t>& ranges,
                                    const KernelsPerRange& per_range) {
  std::vector<Instance> reps;
  for (size_t r : ranges) {
    Instance in;
    in.kernels = per_range[r];
    std::stable_sort(
        in.kernels.begin(), in.kernels.end(),
        [](const KernelActivity* a, const KernelActivity* b) { return a->start_ns < b->start_ns; });
    for (const KernelActivity* k : in.kernels) in.sequence.push_back(k->name);
    reps.push_back(std::move(in));
  }
  return reps;
}

// The modal kernel sequence of `reps` (ties go to the one seen first);
// *count is how many instances launched it.
const std::vector<std::string>* ModalSequence(const std::vector<Instance>& reps, int* count) {
  std::map<std::vector<std::string>, int> seen;
  const std::vector<std::string>* modal = nullptr;
  int best = 0;
  for (const Instance& in : reps) {
    const int c = ++seen[in.sequence];
    if (c > best) {
      best = c;
      modal = &in.sequence;
    }
  }
  *count = best;
  return modal;
}

// One operator's table: per kernel position of the modal sequence the
// median, min and max duration and the median gap over the instances that
// launched it, and the spread of their total kernel time.
OperatorTable ReduceOperator(const std::string& name, const std::vector<Instance>& reps) {
  OperatorTable table;
  table.op = name;
  table.repetitions = static_cast<int>(reps.size());
  const std::vector<std::string>* modal = ModalSequence(reps, &table.consistent);
  const size_t n = modal->size();
  std::vector<std::vector<int64_t>> durations(n), gaps(n);
  std::vector<int64_t> totals;
  for (const Instance& in : reps) {
    if (in.sequence != *modal) continue;
    int64_t total = 0;
    for (size_t i = 0; i < n; ++i) {
      const KernelActivity& k = *in.kernels[i];
      const int64_t d = k.end_ns > k.start_ns ? static_cast<int64_t>(k.end_ns - k.start_ns) : 0;
      durations[i].push_back(d);
      total += d;
      int64_t gap = 0;
      if (i + 1 < n && in.kernels[i + 1]->start_ns > k.end_ns) {
        gap = static_cast<int64_t>(in.kernels[i + 1]->start_ns - k.end_ns);
      }
      gaps[i].push_back(gap);
    }
    totals.push_back(total);
  }
  for (size_t i = 0; i < n; ++i) {
    KernelStats s;
    s.name = (*modal)[i];
    s.duration_ns = Median(durations[i]);
    s.duration_min_ns = *std::min_element(durations[i].begin(), durations[i].end());
    s.duration_max_ns = *std::max_element(durations[i].begin(), durations[i].end());
    s.gap_ns = Median(gaps[i]);
    table.kernels.push_back(std::move(s));
  }
  const int64_t median_total = Median(totals);
  if (median_total > 0) {
    table.spread = static_cast<double>(*std::max_element(totals.begin(), totals.end()) -
                                       *std::min_element(totals.begin(), totals.end())) /
                   static_cast<double>(median_total);
  }
  return table;
}

}  // namespace

ReduceResult Reduce(const Trace& trace) {
  ReduceResult result;
  const KernelsPerRange per_range = AttributeKernels(trace, &result.unattributed_kernels);
  std::vector<std::string> names;
  std::map<std::string, std::vector<size_t>> instances;
  GroupRangesByOperator(trace, per_range, &names, &instances);
  for (const std::string& name : names) {
    result.tables.push_back(ReduceOperator(name, MakeInstances(instances[name], per_range)));
  }
  if (result.tables.empty()) {
    result.error = trace.kernels.empty()
                       ? "no kernel was recorded (is CUPTI activity recording enabled?)"
                       : "no recorded kernel was launched inside an operator range";
  }
  return result;
}

std::string TraceToText(const Trace& trace) {
  std::ostringstream o;
  for (const KernelActivity& k : trace.kernels) {
    o << "K," << k.start_ns << "," << k.end_ns << "," << k.stream << "," << k.correlation << ","
      << k.name << "\n";
  }
  for (const LaunchActivity& l : trace.launches) {
    o << "L," << l.correlation << "," << l.start_ns << "," << l.end_ns << "," << l.thread << "\n";
  }
  for (const OperatorRange& r : trace.ranges) {
    o << "R," << r.start_ns << "," << r.end_ns << "," << r.thread << "," << r.name << "\n";
  }
  return o.str();
}

std::string TraceFromText(const std::string& text, Trace* out) {
  Trace trace;
  std::istringstream in(text);
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    // Splits the first `n` comma-separated numbers after the tag; the rest
    // of the line (if `rest`) is the name.
    auto numbers = [&](size_t n, uint64_t* values, std::string* rest) {
      size_t pos = 2;
      if (line.size() < 2 || line[1] != ',') return false;
      for (size_t i = 0; i < n; ++i) {
        const size_t comma = line.find(',', pos);
        const std::string field =
            line.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        char* end = nullptr;
        if (field.empty() || field[0] == '-') return false;
        values[i] = std::strtoull(field.c_str(), &end, 10);
        if (*end != '\0') return false;
        if (comma == std::string::npos) {
          if (i + 1 < n || rest != nullptr) return false;
          return true;
        }
        pos = comma + 1;
      }
      if (rest == nullptr) return false;  // more fields than expected
      *rest = line.substr(pos);
      return true;
    };
    uint64_t v[4] = {};
    std::string name;
    const std::string where = "line " + std::to_string(line_no) + ": ";
    if (line[0] == 'K') {
      if (!numbers(4, v, &name) || v[1] < v[0]) {
        return where + "expected K,start_ns,end_ns,stream,correlation,name with end >= start";
      }
      trace.kernels.push_back(
          {name, v[0], v[1], static_cast<uint32_t>(v[2]), static_cast<uint32_t>(v[3])});
    } else if (line[0] == 'L') {
      if (!numbers(4, v, nullptr)) return where + "expected L,correlation,start_ns,end_ns,thread";
      trace.launches.push_back({static_cast<uint32_t>(v[0]), v[1], v[2], v[3]});
    } else if (line[0] == 'R') {
      if (!numbers(3, v, &name) || name.empty()) {
        return where + "expected R,start_ns,end_ns,thread,name";
      }
      trace.ranges.push_back({name, v[0], v[1], v[2]});
    } else {
      return where + "unknown record type '" + line.substr(0, 1) + "' (K, L or R)";
    }
  }
  *out = std::move(trace);
  return "";
}

}  // namespace vtrain::gpu
