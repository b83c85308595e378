// Wires vtrain-server together: metrics, the registry of profile sets, the two
// services behind one method runner, the admission gate, the follower of a
// predictor, and the gRPC server with health and reflection.
#include "server/server.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/credentials.h"
#include "core/util/status_macros.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "prometheus/exposer.h"
#include "server/admission.h"
#include "server/call_counter.h"
#include "server/follower.h"
#include "server/log.h"
#include "server/method_runner.h"
#include "server/metrics.h"
#include "server/registry.h"
#include "server/registry_service.h"
#include "server/simulator_service.h"

namespace vtrain::server {

absl::StatusOr<Role> ParseRole(const std::string& name) {
  if (name == "all") return Role::kAll;
  if (name == "registry") return Role::kRegistry;
  if (name == "predictor") return Role::kPredictor;
  return absl::InvalidArgumentError(
      absl::StrCat("--role='", name, "' is unknown; use all, registry or predictor"));
}

class Server::Impl {
 public:
  explicit Impl(const ServerOptions& options)
      : options_(options),
        runner_({.push_token = options.push_token,
                 .require_auth_for_reads = options.require_auth_for_reads,
                 .max_message_bytes = options.max_message_bytes},
                metrics_),
        admission_(AdmissionLimits{.max_concurrent = options.max_concurrent_simulations,
                                   .reserve = options.reserved_slots,
                                   .max_queued_per_client = options.max_queued_per_client}) {}

  // Opens the registry (seeding it unless this is a predictor), builds the
  // services and a predictor's follower, and serves /metrics when asked to.
  absl::Status Init();
  absl::Status Listen();
  // A predictor starts following its registry; other roles do nothing.
  void StartFollowing() {
    if (follower_ != nullptr) follower_->Start();
  }
  void Shutdown(absl::Duration grace);
  void Wait() { server_->Wait(); }
  ~Impl() { StopReadyTimer(); }
  int port() const { return port_; }

 private:
  absl::Status ServeMetrics();

  const ServerOptions options_;
  Metrics metrics_;
  const MethodRunner runner_;
  AdmissionGate admission_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::unique_ptr<Registry> registry_;
  std::unique_ptr<SimulatorService> simulator_;
  std::unique_ptr<RegistryService> registry_service_;
  std::unique_ptr<RegistryLink> link_;  // a predictor's contact with its registry
  std::unique_ptr<Follower> follower_;
  // Health "" SERVING, unless stopping (a predictor's, once it is ready).
  void MarkReady();
  void StopReadyTimer() {
    if (!stop_waiting_.HasBeenNotified()) stop_waiting_.Notify();
    if (ready_timer_.joinable()) ready_timer_.join();
  }

  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  absl::Mutex ready_mu_;
  bool ready_ ABSL_GUARDED_BY(ready_mu_) = false;
  absl::Notification stop_waiting_;  // the readiness timer's end
  std::thread ready_timer_;
};

void Server::Impl::MarkReady() {
  absl::MutexLock lock(&ready_mu_);
  if (ready_ || stopping_) return;
  ready_ = true;
  // The server's own name only: the unnamed overload would set every name,
  // the registry's too.
  server_->GetHealthCheckService()->SetServingStatus("", true);
}

absl::Status Server::Impl::Init() {
  VTRAIN_ASSIGN_OR_RETURN(registry_, Registry::Open(options_.db_path, metrics_));
  if (options_.role != Role::kPredictor) {
    VTRAIN_RETURN_IF_ERROR(registry_->SeedBuiltinsIfEmpty());
  }
  if (options_.role == Role::kPredictor) link_ = std::make_unique<RegistryLink>(options_.registry);
  simulator_ = std::make_unique<SimulatorService>(options_, *registry_, admission_, runner_,
                                                  metrics_, link_.get());
  registry_service_ = std::make_unique<RegistryService>(options_, *registry_, runner_);
  if (options_.role == Role::kPredictor) {
    VTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> creds,
                            common::LoadChannelCredentials({.ca_file = options_.registry_ca_file,
                                                            .cert_file = "",
                                                            .key_file = "",
                                                            .ca_flag = "--registry-ca-file"}));
    follower_ = std::make_unique<Follower>(
        Follower::Options{.address = options_.registry,
                          .credentials = std::move(creds),
                          .token = options_.push_token,
                          .max_message_bytes = options_.max_message_bytes,
                          .link = link_.get()},
        *registry_, metrics_);
  }
  return ServeMetrics();
}

absl::Status Server::Impl::ServeMetrics() {
  if (options_.metrics_listen.empty()) return absl::OkStatus();
  try {
    // prometheus-cpp reports a port it cannot bind by throwing.
    exposer_ = std::make_unique<prometheus::Exposer>(options_.metrics_listen);
  } catch (const std::exception& e) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot serve metrics on --metrics-listen=", options_.metrics_listen, ": ", e.what()));
  }
  exposer_->RegisterCollectable(metrics_.registry());
  return absl::OkStatus();
}

absl::Status Server::Impl::Listen() {
  VTRAIN_ASSIGN_OR_RETURN(
      std::shared_ptr<grpc::ServerCredentials> creds,
      common::LoadServerCredentials({.cert_file = options_.tls_cert_file,
                                     .key_file = options_.tls_key_file,
                                     .client_ca_file = options_.tls_client_ca_file}));
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // No SO_REUSEPORT: a second server on a taken port must fail, not split
  // the requests between two databases.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(options_.listen, creds, &port_);
  // gRPC refuses only past twice the limit; up to there the method runner
  // refuses (and counts) an oversized request itself.
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(std::min<int64_t>(2 * options_.max_message_bytes, INT32_MAX)));
  builder.SetMaxSendMessageSize(static_cast<int>(options_.max_message_bytes));
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> counters;
  counters.push_back(MakeCallCounter(metrics_));
  builder.experimental().SetInterceptorCreators(std::move(counters));
  builder.RegisterService(simulator_.get());
  builder.RegisterService(registry_service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on --listen=", options_.listen, "; is the port in use?"));
  }
  // SERVING once profiles are loaded (they are, by now); a predictor once
  // it has synced with its registry, or after the wait without it.
  const bool wait_for_registry = link_ != nullptr && options_.ready_without_registry_seconds > 0;
  if (wait_for_registry) {
    server_->GetHealthCheckService()->SetServingStatus("", false);
    ready_timer_ = std::thread([this] {
      stop_waiting_.WaitForNotificationWithTimeout(
          absl::Seconds(options_.ready_without_registry_seconds));
      MarkReady();
    });
  } else {
    MarkReady();
  }
  if (link_ != nullptr) {
    // The registry by name: NOT_SERVING while away, the server still SERVING.
    link_->OnChange([this](bool up) {
      server_->GetHealthCheckService()->SetServingStatus(kRegistryHealthService, up);
      if (up) MarkReady();
    });
  }
  Log(absl::StrCat("listening on port ", port_, " with ", registry_->size(), " profile sets"));
  return absl::OkStatus();
}

void Server::Impl::Shutdown(absl::Duration grace) {
  {
    absl::MutexLock lock(&ready_mu_);  // no MarkReady after this
    if (stopping_.exchange(true)) return;
  }
  StopReadyTimer();
  Log("shutting down");
  // Watch streams end on their own now, so they do not hold the grace
  // period; a predictor stops syncing before its calls drain.
  registry_service_->StopWatches();
  if (follower_ != nullptr) follower_->Stop();
  server_->GetHealthCheckService()->SetServingStatus(false);
  server_->Shutdown(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(absl::ToInt64Milliseconds(grace)));
  registry_->Close();
}

absl::Status ValidateListenAddress(const std::string& address, const std::string& flag) {
  const size_t colon = address.rfind(':');
  int64_t port = -1;
  if (colon == std::string::npos || colon + 1 == address.size() ||
      address.find_first_not_of("0123456789", colon + 1) != std::string::npos ||
      address.size() - colon - 1 > 5 || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, "=", address, " is not HOST:PORT with a port in [0, 65535]; e.g. 0.0.0.0:50051"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const ServerOptions& options) {
  if (options.role == Role::kPredictor && options.registry.empty()) {
    return absl::InvalidArgumentError("--role=predictor needs --registry HOST:PORT");
  }
  VTRAIN_RETURN_IF_ERROR(ValidateListenAddress(options.listen, "--listen"));
  if (!options.metrics_listen.empty()) {
    VTRAIN_RETURN_IF_ERROR(ValidateListenAddress(options.metrics_listen, "--metrics-listen"));
  }
  auto impl = std::make_unique<Impl>(options);
  VTRAIN_RETURN_IF_ERROR(impl->Init());
  VTRAIN_RETURN_IF_ERROR(impl->Listen());
  impl->StartFollowing();
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Server::~Server() { impl_->Shutdown(absl::Seconds(1)); }
int Server::port() const { return impl_->port(); }
void Server::Shutdown(absl::Duration grace) { impl_->Shutdown(grace); }
void Server::Wait() { impl_->Wait(); }

}  // namespace vtrain::server
