// A soak of a registry and two predictors in-process on loopback, with real
// SQLite files (issue 12): N clients mix predictions, searches, pushes and
// deletes for a while; it reports calls, failures and latency per kind and the
// process's resident memory over time, then checks that both predictors
// converged to exactly the sets the registry acknowledged. Exits 1 when a
// check fails or a call failed that should not have.
//
//   build/tests/soak_benchmark --clients 64 --seconds 600 [--json] 2>servers.log
//
// Not Google Benchmark: one long run, not repeated short ones.
#include <malloc.h>
#include <stdlib.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/flag_parser.h"
#include "core/profile/default_profiles.h"
#include "grpcpp/grpcpp.h"
#include "proto/profile_set_convert.h"
#include "server/server.h"
#include "tests/bench/soak_load.h"
#include "tests/bench/soak_stats.h"
#include "tests/testing/profile_sets.h"
#include "vtrain/v1/vtrain.grpc.pb.h"

namespace vtrain::server {
namespace {

namespace fs = std::filesystem;

struct SoakOptions {
  int clients = 64;
  int64_t seconds = 600;
  int64_t rss_interval_seconds = 5;
  int64_t converge_seconds = 30;
  // Growth of resident memory from the end of warm-up (a tenth of the run)
  // to the last sample that fails the run.
  int64_t max_rss_growth_mib = 64;
  uint64_t seed = 1;
  bool json = false;
};

// The ids a server lists; nullopt when the call fails.
std::optional<absl::flat_hash_set<std::string>> ListIds(const Server& server) {
  auto stub = v1::ProfileRegistry::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", server.port()), grpc::InsecureChannelCredentials()));
  v1::ListProfileSetsResponse list;
  if (!stub->ListProfileSets(Context(absl::Seconds(10), false).get(), {}, &list).ok()) {
    return std::nullopt;
  }
  absl::flat_hash_set<std::string> ids;
  for (const v1::ProfileSetSummary& s : list.profile_sets()) ids.insert(s.id());
  return ids;
}

// Where the predictors stand against the book and the registry.
struct Convergence {
  bool converged = false;
  double waited_s = 0;
  int64_t live = 0, deleted = 0, unknown = 0;
  std::vector<int64_t> live_missing, deleted_present, differs_from_registry;  // per predictor
  std::vector<std::string> examples;                                          // a few offending ids
};

Convergence CheckOnce(const Server& registry,
                      const std::vector<std::unique_ptr<Server>>& predictors, const SetBook& book) {
  Convergence c;
  const std::vector<std::string> live = book.Live();
  const std::vector<std::string> deleted = book.AllDeleted();
  c.live = static_cast<int64_t>(live.size());
  c.deleted = static_cast<int64_t>(deleted.size());
  c.unknown = book.unknown();
  const std::optional<absl::flat_hash_set<std::string>> reg = ListIds(registry);
  bool ok = reg.has_value();
  // The registry itself first: it acknowledged these.
  std::vector<const Server*> servers = {&registry};
  for (const auto& p : predictors) servers.push_back(p.get());
  for (size_t i = 0; i < servers.size(); ++i) {
    const std::optional<absl::flat_hash_set<std::string>> ids = ListIds(*servers[i]);
    int64_t missing = 0, present = 0, differs = 0;
    if (!ids) {
      ok = false;
      missing = present = differs = -1;
    } else {
      for (const std::string& id : live) {
        if (!ids->contains(id) && ++missing <= 3) c.examples.push_back("missing " + id);
      }
      for (const std::string& id : deleted) {
        if (ids->contains(id) && ++present <= 3) c.examples.push_back("undeleted " + id);
      }
      if (reg) {
        for (const std::string& id : *ids) differs += reg->contains(id) ? 0 : 1;
        for (const std::string& id : *reg) differs += ids->contains(id) ? 0 : 1;
      }
      ok = ok && missing == 0 && present == 0 && differs == 0;
    }
    c.live_missing.push_back(missing);
    c.deleted_present.push_back(present);
    c.differs_from_registry.push_back(differs);
  }
  c.converged = ok;
  return c;
}

// A registry and two predictors on 127.0.0.1 with SQLite files in `dir`.
struct Servers {
  std::unique_ptr<Server> registry;
  std::vector<std::unique_ptr<Server>> predictors;
};

absl::StatusOr<Servers> StartServers(const fs::path& dir) {
  auto start = [&](const std::string& db, Role role,
                   const std::string& registry) -> absl::StatusOr<std::unique_ptr<Server>> {
    ServerOptions so;
    so.listen = "127.0.0.1:0";
    so.db_path = (dir / db).string();
    so.role = role;
    so.registry = registry;
    so.push_token = kToken;
    return Server::Start(so);
  };
  Servers servers;
  absl::StatusOr<std::unique_ptr<Server>> registry = start("registry.db", Role::kRegistry, "");
  if (!registry.ok()) return registry.status();
  servers.registry = *std::move(registry);
  const std::string address = absl::StrCat("127.0.0.1:", servers.registry->port());
  for (const char* db : {"predictor0.db", "predictor1.db"}) {
    absl::StatusOr<std::unique_ptr<Server>> p = start(db, Role::kPredictor, address);
    if (!p.ok()) return p.status();
    servers.predictors.push_back(*std::move(p));
  }
  return servers;
}

// The clients' figures and the memory samples of one run.
struct LoadResult {
  ClientStats total;
  std::vector<MemorySample> memory;
  double elapsed_s = 0;
};

// Runs the clients for o.seconds, sampling memory on this thread.
LoadResult RunLoad(const SoakOptions& o, const Servers& servers, SetBook& book) {
  Targets targets;
  targets.registry = v1::ProfileRegistry::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", servers.registry->port()), grpc::InsecureChannelCredentials()));
  for (const auto& p : servers.predictors) {
    targets.predictors.push_back(v1::Simulator::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", p->port()), grpc::InsecureChannelCredentials())));
  }
  std::atomic<int64_t> next_duration{50'000};
  std::atomic<bool> stop{false};
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < o.clients; ++i) {
    clients.push_back(std::make_unique<Client>(targets, book, next_duration, o.seed * 1000 + i));
  }
  LoadResult load;
  load.memory.reserve(static_cast<size_t>(o.seconds / o.rss_interval_seconds + 4));
  const absl::Time begin = absl::Now();
  load.memory.push_back(SampleMemory(begin));
  std::vector<std::thread> threads;
  for (auto& c : clients) threads.emplace_back([&c, &stop] { c->Run(stop); });
  const absl::Time end = begin + absl::Seconds(o.seconds);
  while (absl::Now() < end) {
    absl::SleepFor(std::min(absl::Seconds(o.rss_interval_seconds), end - absl::Now()));
    load.memory.push_back(SampleMemory(begin));
  }
  stop = true;
  for (std::thread& t : threads) t.join();
  load.elapsed_s = absl::ToDoubleSeconds(absl::Now() - begin);
  load.memory.push_back(SampleMemory(begin));
  for (const auto& c : clients) {
    for (int k = 0; k < kNumKinds; ++k) load.total[k].Merge(c->stats()[k]);
  }
  return load;
}

// Memory over the run: growth after warm-up (the first tenth, at least 5 s).
struct MemoryReport {
  double warm_s = 0;
  MemorySample first, warm, peak, last;
  int64_t growth_kib = 0;
  bool ok = false;
  std::vector<std::string> rss_series, heap_series, rss_text, heap_text;
};

MemoryReport ReportMemory(const SoakOptions& o, const std::vector<MemorySample>& mem) {
  MemoryReport r;
  r.warm_s = std::max(5.0, static_cast<double>(o.seconds) / 10);
  r.first = r.warm = r.peak = mem.front();
  for (const MemorySample& m : mem) {
    r.peak.rss_kib = std::max(r.peak.rss_kib, m.rss_kib);
    r.peak.heap_kib = std::max(r.peak.heap_kib, m.heap_kib);
    if (m.t_s <= r.warm_s + 1) r.warm = m;  // the sample due at warm_s, a little late
  }
  r.last = mem.back();
  r.growth_kib = r.last.rss_kib - r.warm.rss_kib;
  r.ok = r.growth_kib <= o.max_rss_growth_mib * 1024;
  // The series, at most ~20 points for the text.
  const size_t stride = std::max<size_t>(1, mem.size() / 20);
  for (size_t i = 0; i < mem.size(); ++i) {
    r.rss_series.push_back(absl::StrCat(mem[i].rss_kib));
    r.heap_series.push_back(absl::StrCat(mem[i].heap_kib));
    if (i % stride == 0 || i + 1 == mem.size()) {
      r.rss_text.push_back(absl::StrFormat("%.0fs:%.1f", mem[i].t_s, mem[i].rss_kib / 1024.0));
      r.heap_text.push_back(absl::StrFormat("%.0fs:%.1f", mem[i].t_s, mem[i].heap_kib / 1024.0));
    }
  }
  return r;
}

// Bounded wait for the predictors to hold what the registry does.
Convergence WaitForConvergence(const SoakOptions& o, const Servers& servers, const SetBook& book) {
  const absl::Time start = absl::Now();
  Convergence conv;
  do {
    conv = CheckOnce(*servers.registry, servers.predictors, book);
    if (conv.converged) break;
    absl::SleepFor(absl::Milliseconds(250));
  } while (absl::Now() - start < absl::Seconds(o.converge_seconds));
  conv.waited_s = absl::ToDoubleSeconds(absl::Now() - start);
  return conv;
}

void PrintKinds(const LoadResult& load) {
  std::printf("%-18s %9s %9s %9s %9s %10s %10s  %s\n", "kind", "calls", "calls/s", "expected",
              "failures", "p50_ms", "p99_ms", "failures by code");
  for (int k = 0; k < kNumKinds; ++k) {
    const KindStats& s = load.total[k];
    std::vector<std::string> codes;
    for (int c = 0; c < 17; ++c) {
      if (s.unexpected[c] > 0) codes.push_back(absl::StrCat(CodeName(c), "=", s.unexpected[c]));
      if (s.expected[c] > 0) {
        codes.push_back(absl::StrCat(CodeName(c), "=", s.expected[c], " (expected)"));
      }
    }
    if (s.bad_responses > 0) codes.push_back(absl::StrCat("bad_response=", s.bad_responses));
    std::printf("%-18s %9lld %9.1f %9lld %9lld %10.3f %10.3f  %s\n", kKindNames[k],
                static_cast<long long>(s.calls), static_cast<double>(s.calls) / load.elapsed_s,
                static_cast<long long>(s.Expected()), static_cast<long long>(s.Unexpected()),
                s.latency.QuantileMs(0.5), s.latency.QuantileMs(0.99),
                absl::StrJoin(codes, ", ").c_str());
  }
}

void PrintText(const SoakOptions& o, const LoadResult& load, const MemoryReport& m,
               const Convergence& conv, const SetBook& book, bool pass) {
  std::printf("\nsoak: %d clients, %.1f s, registry + 2 predictors on 127.0.0.1\n", o.clients,
              load.elapsed_s);
  PrintKinds(load);
  absl::PrintF(
      "rss_kib: first %d, after warm-up (%.0f s) %d, max %d, last %d; growth %d KiB "
      "(limit %d MiB) %s\n",
      m.first.rss_kib, m.warm_s, m.warm.rss_kib, m.peak.rss_kib, m.last.rss_kib, m.growth_kib,
      o.max_rss_growth_mib, m.ok ? "ok" : "GROWING");
  absl::PrintF(
      "heap_in_use_kib: first %d, after warm-up %d, max %d, last %d (of which the "
      "soak's record of deleted ids %d)\n",
      m.first.heap_kib, m.warm.heap_kib, m.peak.heap_kib, m.last.heap_kib,
      book.DeletedRecordBytes() / 1024);
  absl::PrintF("rss_mib:  %s\nheap_mib: %s\n", absl::StrJoin(m.rss_text, " "),
               absl::StrJoin(m.heap_text, " "));
  std::printf(
      "sets: %lld acknowledged and live, %lld deleted, %lld unknown (a failed push or "
      "delete)\n",
      static_cast<long long>(conv.live), static_cast<long long>(conv.deleted),
      static_cast<long long>(conv.unknown));
  for (size_t i = 0; i < conv.live_missing.size(); ++i) {
    std::printf("  %-11s live missing %lld, deleted present %lld, differs from registry %lld\n",
                i == 0 ? "registry" : absl::StrCat("predictor", i - 1).c_str(),
                static_cast<long long>(conv.live_missing[i]),
                static_cast<long long>(conv.deleted_present[i]),
                static_cast<long long>(conv.differs_from_registry[i]));
  }
  for (const std::string& e : conv.examples) std::printf("  %s\n", e.c_str());
  std::printf("convergence: %s after %.2f s (limit %lld s)\n", conv.converged ? "ok" : "FAILED",
              conv.waited_s, static_cast<long long>(o.converge_seconds));
  std::printf("result: %s\n", pass ? "PASS" : "FAIL");
}

void PrintJson(const SoakOptions& o, const LoadResult& load, const MemoryReport& m,
               const Convergence& conv, const SetBook& book, bool pass) {
  std::string kinds;
  for (int k = 0; k < kNumKinds; ++k) {
    const KindStats& s = load.total[k];
    std::vector<std::string> codes;
    for (int c = 0; c < 17; ++c) {
      if (s.unexpected[c] > 0)
        codes.push_back(absl::StrFormat("\"%s\":%d", CodeName(c), s.unexpected[c]));
    }
    absl::StrAppend(
        &kinds, k == 0 ? "" : ",",
        absl::StrFormat("\"%s\":{\"calls\":%d,\"calls_per_s\":%.2f,\"expected\":%d,"
                        "\"failures\":%d,\"bad_responses\":%d,\"failures_by_code\":{%s},"
                        "\"p50_ms\":%.3f,\"p99_ms\":%.3f}",
                        kKindNames[k], s.calls, static_cast<double>(s.calls) / load.elapsed_s,
                        s.Expected(), s.Unexpected(), s.bad_responses, absl::StrJoin(codes, ","),
                        s.latency.QuantileMs(0.5), s.latency.QuantileMs(0.99)));
  }
  absl::PrintF(
      "{\"clients\":%d,\"seconds\":%.1f,\"kinds\":{%s},"
      "\"rss_kib\":{\"first\":%d,\"after_warmup\":%d,\"max\":%d,\"last\":%d,\"ok\":%s},"
      "\"heap_in_use_kib\":{\"first\":%d,\"after_warmup\":%d,\"max\":%d,\"last\":%d,"
      "\"deleted_record\":%d},\"memory_series\":{\"interval_s\":%d,\"rss_kib\":[%s],"
      "\"heap_in_use_kib\":[%s]},"
      "\"sets\":{\"live\":%d,\"deleted\":%d,\"unknown\":%d},"
      "\"convergence\":{\"ok\":%s,\"waited_s\":%.2f,\"live_missing\":[%s],"
      "\"deleted_present\":[%s],\"differs_from_registry\":[%s]},\"pass\":%s}\n",
      o.clients, load.elapsed_s, kinds, m.first.rss_kib, m.warm.rss_kib, m.peak.rss_kib,
      m.last.rss_kib, m.ok ? "true" : "false", m.first.heap_kib, m.warm.heap_kib, m.peak.heap_kib,
      m.last.heap_kib, book.DeletedRecordBytes() / 1024, o.rss_interval_seconds,
      absl::StrJoin(m.rss_series, ","), absl::StrJoin(m.heap_series, ","), conv.live, conv.deleted,
      conv.unknown, conv.converged ? "true" : "false", conv.waited_s,
      absl::StrJoin(conv.live_missing, ","), absl::StrJoin(conv.deleted_present, ","),
      absl::StrJoin(conv.differs_from_registry, ","), pass ? "true" : "false");
}

int Run(const SoakOptions& o) {
  std::string tmpl = (fs::temp_directory_path() / "vtrain_soak_XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) {
    std::printf("cannot make a temp dir under %s\n", fs::temp_directory_path().c_str());
    return 1;
  }
  const fs::path dir = tmpl;
  absl::StatusOr<Servers> servers = StartServers(dir);
  if (!servers.ok()) {
    std::printf("cannot start the servers: %s\n", servers.status().ToString().c_str());
    return 1;
  }
  SetBook book(static_cast<size_t>(o.seconds) * 256);
  const LoadResult load = RunLoad(o, *servers, book);
  const Convergence conv = WaitForConvergence(o, *servers, book);
  const MemoryReport memory = ReportMemory(o, load.memory);
  int64_t unexpected = 0;
  for (const KindStats& k : load.total) unexpected += k.Unexpected();
  const bool pass = unexpected == 0 && memory.ok && conv.converged;
  PrintText(o, load, memory, conv, book, pass);
  if (o.json) PrintJson(o, load, memory, conv, book, pass);
  std::fflush(stdout);
  for (auto& p : servers->predictors) p->Shutdown(absl::Seconds(1));
  servers->registry->Shutdown(absl::Seconds(1));
  servers->predictors.clear();
  servers->registry.reset();
  fs::remove_all(dir);
  return pass ? 0 : 1;
}

absl::StatusOr<SoakOptions> ParseFlags(const std::vector<std::string>& args, bool& help) {
  common::FlagParser flags("soak_benchmark");
  flags.AddValue("clients", "N", "concurrent clients (default 64)");
  flags.AddValue("seconds", "S", "how long the load runs (default 600)");
  flags.AddValue("rss-interval-seconds", "S", "resident memory sampling period (default 5)");
  flags.AddValue("converge-seconds", "S", "how long predictors may take to converge (default 30)");
  flags.AddValue("max-rss-growth-mib", "MIB",
                 "resident memory growth after warm-up that fails the run (default 64)");
  flags.AddValue("seed", "N", "random seed (default 1)");
  flags.AddSwitch("json", "also print the figures as one JSON line");
  flags.AddSwitch("help", "this text");
  if (absl::Status s = flags.Parse(args); !s.ok()) return s;
  help = flags.Switch("help");
  if (help) {
    std::printf("usage: soak_benchmark [flags]\n%s", flags.Usage().c_str());
    return SoakOptions{};
  }
  SoakOptions o;
  o.json = flags.Switch("json");
  auto get = [&](const char* name, int64_t lo, int64_t& out) -> absl::Status {
    absl::StatusOr<std::optional<int64_t>> v = flags.GetInt(name);
    if (!v.ok()) return v.status();
    if (!v->has_value()) return absl::OkStatus();
    if (**v < lo) return absl::InvalidArgumentError(absl::StrCat("--", name, " must be >= ", lo));
    out = **v;
    return absl::OkStatus();
  };
  int64_t clients = o.clients, seed = static_cast<int64_t>(o.seed);
  for (absl::Status s :
       {get("clients", 1, clients), get("seconds", 1, o.seconds),
        get("rss-interval-seconds", 1, o.rss_interval_seconds),
        get("converge-seconds", 0, o.converge_seconds),
        get("max-rss-growth-mib", 0, o.max_rss_growth_mib), get("seed", 0, seed)}) {
    if (!s.ok()) return s;
  }
  if (clients > 4096) return absl::InvalidArgumentError("--clients must be <= 4096");
  o.clients = static_cast<int>(clients);
  o.seed = static_cast<uint64_t>(seed);
  return o;
}

}  // namespace
}  // namespace vtrain::server

int main(int argc, char** argv) {
  bool help = false;
  absl::StatusOr<vtrain::server::SoakOptions> o =
      vtrain::server::ParseFlags(std::vector<std::string>(argv + 1, argv + argc), help);
  if (!o.ok()) {
    std::fprintf(stderr, "soak_benchmark: %s\n", o.status().ToString().c_str());
    return 2;
  }
  if (help) return 0;
  return vtrain::server::Run(*o);
}
