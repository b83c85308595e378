#include "server/call_counter.h"

#include <string>

#include "server/status.h"

namespace vtrain::server {
namespace {

class CallCounter final : public grpc::experimental::Interceptor {
 public:
  CallCounter(Metrics& metrics, std::string method)
      : metrics_(metrics), method_(std::move(method)) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      metrics_.Call(method_, StatusCodeName(methods->GetSendStatus().error_code()));
    }
    methods->Proceed();
  }

 private:
  Metrics& metrics_;
  const std::string method_;
};

class CallCounterFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit CallCounterFactory(Metrics& metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new CallCounter(metrics_, info->method());  // gRPC owns and deletes it
  }

 private:
  Metrics& metrics_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeCallCounter(
    Metrics& metrics) {
  return std::make_unique<CallCounterFactory>(metrics);
}

}  // namespace vtrain::server
