// vtrain-server's profiling-work queue, guarded reads, streamed searches and
// TLS / mutual TLS with certificates made by openssl.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "core/plan/search.h"
#include "core/predict/predictor.h"
#include "core/profile/default_profiles.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/convert.h"
#include "server/profile_store.h"
#include "server/server.h"
#include "tests/server/server_testing.h"
#include "tests/testing/subprocess.h"
#include "vtrain/v1/vtrain.grpc.pb.h"

namespace vtrain::server {
namespace {

namespace fs = std::filesystem;

TEST(ServerTest, MissingKeysBecomeProfilingWork) {
  TempDir dir;
  auto server = StartServer(dir.File("w.db"));
  ASSERT_NE(server, nullptr);
  auto sim = v1::Simulator::NewStub(ChannelTo(*server));
  for (int i = 0; i < 3; ++i) {
    v1::PredictResponse resp;
    ASSERT_TRUE(sim->Predict(Ctx().get(), Gpt13bRequest(), &resp).ok());
  }
  auto reg = v1::ProfileRegistry::NewStub(ChannelTo(*server));
  v1::NextProfilingWorkRequest req;
  req.set_gpu("a100-sxm4-80gb");
  req.set_max_items(5);
  v1::NextProfilingWorkResponse work;
  ASSERT_TRUE(reg->NextProfilingWork(Ctx().get(), req, &work).ok());
  ASSERT_EQ(work.work_size(), 5);
  EXPECT_EQ(work.work(0).requests(), 3);  // every prediction needed it
  EXPECT_NE(work.work(0).key().find("a100-sxm4-80gb"), std::string::npos);
  req.set_gpu("h100-sxm5-80gb");
  ASSERT_TRUE(reg->NextProfilingWork(Ctx().get(), req, &work).ok());
  EXPECT_EQ(work.work_size(), 0);
  req.set_max_items(-1);
  EXPECT_EQ(reg->NextProfilingWork(Ctx().get(), req, &work).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

// The same Predict request about the same profile set is answered from the
// cache, marked as such and otherwise identical; another request, a newer
// set for the GPU, or a server with the cache off simulates again.
TEST(ServerTest, RepeatedPredictionsAreAnsweredFromTheCache) {
  TempDir dir;
  auto server = StartServer(dir.File("p.db"));
  ASSERT_NE(server, nullptr);
  auto sim = v1::Simulator::NewStub(ChannelTo(*server));
  auto predict = [&](const v1::PredictRequest& r) {
    v1::PredictResponse resp;
    grpc::Status s = sim->Predict(Ctx().get(), r, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp;
  };
  const v1::PredictResponse first = predict(Gpt13bRequest());
  const v1::PredictResponse second = predict(Gpt13bRequest());
  EXPECT_FALSE(first.simulation().cached());
  EXPECT_TRUE(second.simulation().cached());
  v1::PredictResponse a = first, b = second;
  b.mutable_simulation()->set_cached(false);
  EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString());  // wall time included

  v1::PredictRequest other = Gpt13bRequest();
  other.mutable_plan()->set_global_batch(128);
  const v1::PredictResponse different = predict(other);
  EXPECT_FALSE(different.simulation().cached());
  EXPECT_NE(different.iteration_time_ns(), first.iteration_time_ns());
  EXPECT_TRUE(predict(other).simulation().cached());

  // A newer set for the A100 answers from now on: not the old answer.
  auto reg = v1::ProfileRegistry::NewStub(ChannelTo(*server));
  v1::PushProfileSetRequest push;
  *push.mutable_profile_set() = MeasuredSet(90'000);
  v1::PushProfileSetResponse pushed;
  ASSERT_TRUE(reg->PushProfileSet(Ctx(kToken).get(), push, &pushed).ok());
  const v1::PredictResponse newer = predict(Gpt13bRequest());
  EXPECT_FALSE(newer.simulation().cached());
  EXPECT_EQ(newer.profile_set_id(), pushed.id());
  EXPECT_NE(newer.profile_set_id(), first.profile_set_id());

  ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.db_path = dir.File("off.db");
  o.prediction_cache_entries = 0;
  absl::StatusOr<std::unique_ptr<Server>> off = Server::Start(o);
  ASSERT_TRUE(off.ok()) << off.status();
  auto off_sim = v1::Simulator::NewStub(ChannelTo(**off));
  for (int i = 0; i < 2; ++i) {
    v1::PredictResponse resp;
    ASSERT_TRUE(off_sim->Predict(Ctx().get(), Gpt13bRequest(), &resp).ok());
    EXPECT_FALSE(resp.simulation().cached());
    EXPECT_EQ(resp.iteration_time_ns(), first.iteration_time_ns());
  }
}

// A partial set (here a kernel table without error bands, like an
// nccl-tests import) pushed to a server does not take the GPU's default
// away: predictions keep their 90% interval, use the pushed table, name both
// sets, and the cached answers of the old default are not reused.
TEST(ServerTest, APartialSetIsLaidOverTheDefaultAndKeepsTheInterval) {
  TempDir dir;
  auto server = StartServer(dir.File("partial.db"));
  ASSERT_NE(server, nullptr);
  auto sim = v1::Simulator::NewStub(ChannelTo(*server));
  v1::PredictRequest request = Gpt13bRequest();
  v1::PredictResponse before;
  ASSERT_TRUE(sim->Predict(Ctx().get(), request, &before).ok());
  ASSERT_GT(before.interval().coverage(), 0);

  auto reg = v1::ProfileRegistry::NewStub(ChannelTo(*server));
  v1::PushProfileSetRequest push;
  *push.mutable_profile_set() = PartialSet(90'000);
  v1::PushProfileSetResponse pushed;
  ASSERT_TRUE(reg->PushProfileSet(Ctx(kToken).get(), push, &pushed).ok());
  EXPECT_FALSE(pushed.complete());
  EXPECT_NE(pushed.note().find("partial set"), std::string::npos) << pushed.note();
  EXPECT_EQ(pushed.default_profile_set_id(),
            absl::StrCat(before.profile_set_id(), "+", pushed.id()));

  v1::PredictResponse after;
  ASSERT_TRUE(sim->Predict(Ctx().get(), request, &after).ok());
  EXPECT_FALSE(after.simulation().cached());
  EXPECT_EQ(after.profile_set_id(), pushed.default_profile_set_id());
  EXPECT_EQ(after.interval().coverage(), before.interval().coverage());
  EXPECT_EQ(after.interval().regime(), before.interval().regime());
}

TEST(ServerTest, ReadsNeedTheTokenWhenRequired) {
  TempDir dir;
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.db_path = dir.File("r.db");
  o.push_token = kToken;
  o.require_auth_for_reads = true;
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  auto sim = v1::Simulator::NewStub(ChannelTo(**server));
  v1::PredictResponse resp;
  EXPECT_EQ(sim->Predict(Ctx().get(), Gpt13bRequest(), &resp).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(sim->Predict(Ctx(kToken).get(), Gpt13bRequest(), &resp).ok());
  auto reg = v1::ProfileRegistry::NewStub(ChannelTo(**server));
  v1::ListProfileSetsResponse listed;
  EXPECT_EQ(reg->ListProfileSets(Ctx().get(), {}, &listed).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

TEST(ServerTest, SearchStreamsProgressThenTheResultTheLocalSearchGives) {
  TempDir dir;
  auto server = StartServer(dir.File("s.db"));
  ASSERT_NE(server, nullptr);
  SearchSpace space;
  space.model = *ModelPreset("gpt3-2.7b");
  space.cluster = DefaultCluster(*GpuByName("a100-sxm4-80gb"), 0);
  space.cluster.price_usd_per_gpu_hour = 4.096;
  space.global_batch = 128;
  space.max_gpus = 32;
  space.train_tokens = 10e9;
  v1::SearchRequest req;
  req.mutable_model()->set_preset("gpt3-2.7b");
  req.mutable_cluster()->set_price_usd_per_gpu_hour(4.096);
  req.set_global_batch(128);
  req.set_max_gpus(32);
  req.set_train_tokens(10e9);
  req.set_objective(v1::OBJECTIVE_COST);
  req.set_top(5);
  // The core SearchSpace's own values: fp16, full recomputation, no overlaps.
  req.set_dtype(v1::DTYPE_FP16);
  req.mutable_space()->set_settings(v1::SETTINGS_MEGATRON_DEFAULTS);
  req.mutable_space()->add_recomputes(v1::RECOMPUTE_FULL);
  auto stub = v1::Simulator::NewStub(ChannelTo(*server));
  auto ctx = Ctx();
  auto reader = stub->Search(ctx.get(), req);
  v1::SearchResponse msg;
  int progress = 0, results = 0;
  v1::SearchResult result;
  while (reader->Read(&msg)) {
    if (msg.has_progress()) {
      ++progress;
      EXPECT_EQ(results, 0) << "progress after the result";
      EXPECT_LE(msg.progress().evaluated(), msg.progress().total());
    }
    if (msg.has_result()) {
      ++results;
      result = msg.result();
    }
  }
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_GT(progress, 0);
  ASSERT_EQ(results, 1);
  SearchOptions o;
  o.objective = Objective::kCost;
  absl::StatusOr<SearchResult> local = Search(space, DefaultProfileSet(space.cluster.gpu), o);
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(result.considered(), local->considered);
  ASSERT_TRUE(result.has_best());
  EXPECT_DOUBLE_EQ(result.best().cost_usd(), local->plans[local->best].cost_usd);
  EXPECT_EQ(result.pareto_size(), static_cast<int>(local->pareto.size()));
  EXPECT_EQ(result.fastest_size(), 5);

  // A bad objective is INVALID_ARGUMENT naming the field.
  req.set_objective(static_cast<v1::Objective>(42));
  auto bad_ctx = Ctx();
  auto bad = stub->Search(bad_ctx.get(), req);
  while (bad->Read(&msg)) {
  }
  grpc::Status s = bad->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("objective"), std::string::npos);
}

// Runs openssl; false (with its stderr in the failure) when it fails.
bool OpenSsl(const std::vector<std::string>& args) {
  absl::StatusOr<testing::ProcessResult> r = testing::RunProcess("/usr/bin/openssl", args, 60);
  EXPECT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r.ok() ? r->exit_code : -1, 0) << (r.ok() ? r->err : "");
  return r.ok() && r->exit_code == 0;
}

// A CA, and server and client certificates it signs, and an unrelated CA
// (ECDSA P-256, one day).
// The server's names are localhost and 127.0.0.1.
bool MakeCertificates(const TempDir& dir) {
  const std::string ext = dir.File("server.ext");
  std::ofstream(ext) << "subjectAltName=DNS:localhost,IP:127.0.0.1\n";
  const std::vector<std::string> key = {"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                                        "-nodes"};
  auto req = [&](const std::string& name, const std::string& cn, bool self_signed) {
    std::vector<std::string> a = {"req"};
    if (self_signed) a.insert(a.end(), {"-x509", "-days", "1"});
    a.insert(a.end(), key.begin(), key.end());
    a.insert(a.end(), {"-keyout", dir.File(name + ".key"), "-out",
                       dir.File(name + (self_signed ? ".pem" : ".csr")), "-subj", "/CN=" + cn});
    return OpenSsl(a);
  };
  auto sign = [&](const std::string& name, bool with_ext) {
    std::vector<std::string> a = {"x509",
                                  "-req",
                                  "-in",
                                  dir.File(name + ".csr"),
                                  "-CA",
                                  dir.File("ca.pem"),
                                  "-CAkey",
                                  dir.File("ca.key"),
                                  "-CAcreateserial",
                                  "-days",
                                  "1",
                                  "-out",
                                  dir.File(name + ".pem")};
    if (with_ext) a.insert(a.end(), {"-extfile", ext});
    return OpenSsl(a);
  };
  return req("ca", "vtrain test CA", true) && req("other-ca", "another CA", true) &&
         req("server", "localhost", false) && sign("server", true) &&
         req("client", "vtrain test client", false) && sign("client", false);
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

grpc::StatusCode HealthOver(const std::string& target,
                            std::shared_ptr<grpc::ChannelCredentials> creds) {
  auto stub = v1::Simulator::NewStub(grpc::CreateChannel(target, creds));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::PredictResponse resp;
  return stub->Predict(&ctx, Gpt13bRequest(), &resp).error_code();
}

// TLS and mutual TLS on loopback with certificates made by openssl: a
// client that trusts the CA gets predictions, a plaintext one does not, and
// with --tls-client-ca-file a client needs its certificate; vtrainctl's
// --tls-* flags reach the same server.
TEST(ServerTest, ServesTlsAndMutualTls) {
  if (access("/usr/bin/openssl", X_OK) != 0) GTEST_SKIP() << "openssl is not installed";
  TempDir dir;
  ASSERT_TRUE(MakeCertificates(dir));
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.db_path = dir.File("tls.db");
  o.push_token = kToken;
  o.tls_cert_file = dir.File("server.pem");
  o.tls_key_file = dir.File("server.key");
  absl::StatusOr<std::unique_ptr<Server>> tls = Server::Start(o);
  ASSERT_TRUE(tls.ok()) << tls.status();
  const std::string target = absl::StrCat("localhost:", (*tls)->port());
  grpc::SslCredentialsOptions trust;
  trust.pem_root_certs = Slurp(dir.File("ca.pem"));
  EXPECT_EQ(HealthOver(target, grpc::SslCredentials(trust)), grpc::StatusCode::OK);
  EXPECT_NE(HealthOver(target, grpc::InsecureChannelCredentials()), grpc::StatusCode::OK);
  grpc::SslCredentialsOptions wrong_ca;
  wrong_ca.pem_root_certs = Slurp(dir.File("other-ca.pem"));
  EXPECT_NE(HealthOver(target, grpc::SslCredentials(wrong_ca)), grpc::StatusCode::OK);
  // vtrainctl with --tls-ca-file.
  absl::StatusOr<testing::ProcessResult> ctl = testing::RunProcess(
      VTRAIN_TEST_VTRAINCTL, {"predict", "--server", target, "--tls-ca-file", dir.File("ca.pem"),
                              "--model", "gpt3-125m", "--gpus", "1", "--global-batch", "8"});
  ASSERT_TRUE(ctl.ok());
  EXPECT_EQ(ctl->exit_code, 0) << ctl->err;
  EXPECT_NE(ctl->out.find("iteration time"), std::string::npos);
  (*tls)->Shutdown(absl::Seconds(1));

  o.db_path = dir.File("mtls.db");
  o.tls_client_ca_file = dir.File("ca.pem");
  absl::StatusOr<std::unique_ptr<Server>> mtls = Server::Start(o);
  ASSERT_TRUE(mtls.ok()) << mtls.status();
  const std::string mtarget = absl::StrCat("localhost:", (*mtls)->port());
  EXPECT_NE(HealthOver(mtarget, grpc::SslCredentials(trust)), grpc::StatusCode::OK)
      << "a client without a certificate is refused";
  grpc::SslCredentialsOptions with_cert = trust;
  with_cert.pem_cert_chain = Slurp(dir.File("client.pem"));
  with_cert.pem_private_key = Slurp(dir.File("client.key"));
  EXPECT_EQ(HealthOver(mtarget, grpc::SslCredentials(with_cert)), grpc::StatusCode::OK);
  ctl = testing::RunProcess(
      VTRAIN_TEST_VTRAINCTL,
      {"predict", "--server", mtarget, "--tls-ca-file", dir.File("ca.pem"), "--tls-cert-file",
       dir.File("client.pem"), "--tls-key-file", dir.File("client.key"), "--model", "gpt3-125m",
       "--gpus", "1", "--global-batch", "8"});
  ASSERT_TRUE(ctl.ok());
  EXPECT_EQ(ctl->exit_code, 0) << ctl->err;
  // bench uses the TLS flags for every client (it used to dial plaintext).
  ctl = testing::RunProcess(
      VTRAIN_TEST_VTRAINCTL,
      {"bench", "--server", mtarget, "--tls-ca-file", dir.File("ca.pem"), "--tls-cert-file",
       dir.File("client.pem"), "--tls-key-file", dir.File("client.key"), "--method", "health",
       "--requests", "20", "--concurrency", "2", "--json"});
  ASSERT_TRUE(ctl.ok());
  EXPECT_EQ(ctl->exit_code, 0) << ctl->err << ctl->out;
  EXPECT_NE(ctl->out.find("\"requests\":20,\"errors\":0"), std::string::npos) << ctl->out;
  // A certificate without the CA would be plaintext: refused before dialling.
  ctl = testing::RunProcess(VTRAIN_TEST_VTRAINCTL, {"bench", "--server", mtarget, "--tls-cert-file",
                                                    dir.File("client.pem"), "--tls-key-file",
                                                    dir.File("client.key"), "--method", "health"});
  ASSERT_TRUE(ctl.ok());
  EXPECT_EQ(ctl->exit_code, 2) << ctl->err;
  EXPECT_NE(ctl->err.find("need --tls-ca-file"), std::string::npos) << ctl->err;
  (*mtls)->Shutdown(absl::Seconds(1));
}

// Predict runs on gRPC's thread when a slot is free at once and otherwise
// (queued, or kernel granularity) on a thread of its own that waits for one:
// through a single slot, many concurrent clients mixing both granularities
// all get the in-process answers.
TEST(ServerTest, ConcurrentPredictionsThroughOneSlotAllAnswerAsInProcess) {
  TempDir dir;
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.db_path = dir.File("q.db");
  o.max_concurrent_simulations = 1;
  // Every call simulates (and queues for the slot): no cached answers.
  o.prediction_cache_entries = 0;
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<Job> job = proto::JobFromProto(Gpt13bRequest());
  ASSERT_TRUE(job.ok());
  const ProfileSet tables = DefaultProfileSet(job->cluster.gpu);
  absl::StatusOr<Prediction> op = Predict(*job, tables);
  PredictOptions kernel_options;
  kernel_options.granularity = Granularity::kKernel;
  absl::StatusOr<Prediction> kernel = Predict(*job, tables, kernel_options);
  ASSERT_TRUE(op.ok() && kernel.ok());
  constexpr int kClients = 12;
  constexpr int kCalls = 10;
  std::atomic<int> wrong{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      auto sim = v1::Simulator::NewStub(ChannelTo(**server));
      for (int i = 0; i < kCalls; ++i) {
        v1::PredictRequest r = Gpt13bRequest();
        const bool use_kernel = (c + i) % 3 == 0;
        if (use_kernel) r.set_granularity(v1::GRANULARITY_KERNEL);
        v1::PredictResponse resp;
        grpc::Status s = sim->Predict(Ctx().get(), r, &resp);
        const int64_t want = use_kernel ? kernel->iteration_time_ns : op->iteration_time_ns;
        if (!s.ok() || resp.iteration_time_ns() != want) ++wrong;
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace vtrain::server
