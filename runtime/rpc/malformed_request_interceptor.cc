#include "runtime/rpc/malformed_request_interceptor.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace baton::rpc {
namespace {

using grpc::experimental::InterceptionHookPoints;

class MalformedRequestInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit MalformedRequestInterceptor(const char* method) : method_(method != nullptr ? method : "") {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status status = methods->GetSendStatus();
      if (status.error_code() == grpc::StatusCode::INTERNAL && status.error_message().empty()) {
        methods->ModifySendStatus(grpc::Status(
            grpc::StatusCode::INVALID_ARGUMENT,
            absl::StrCat("the request does not parse as ", method_,
                         "'s message: a string field holds invalid UTF-8, or the bytes are not "
                         "protobuf")));
      }
    }
    methods->Proceed();
  }

 private:
  const std::string method_;  // "/baton.v1.InferenceService/Generate"
};

class Factory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override {
    return new MalformedRequestInterceptor(info->method());
  }
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MalformedRequestInterceptorFactory() {
  return std::make_unique<Factory>();
}

}  // namespace baton::rpc
