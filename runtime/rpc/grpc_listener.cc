#include "runtime/rpc/grpc_listener.h"

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "runtime/rpc/malformed_request_interceptor.h"

namespace baton::rpc {

absl::StatusOr<GrpcListener> ListenExclusive(std::string_view what, const std::string& host, int port,
                                             const std::vector<grpc::Service*>& services,
                                             std::shared_ptr<grpc::ServerCredentials> credentials) {
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  GrpcListener listener;
  builder.AddListeningPort(absl::StrCat(host, ":", port), std::move(credentials), &listener.port);
  for (grpc::Service* service : services) builder.RegisterService(service);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(MalformedRequestInterceptorFactory());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  listener.server = builder.BuildAndStart();
  if (listener.server == nullptr || listener.port == 0) {
    return absl::UnavailableError(
        absl::StrCat(absl::string_view(what.data(), what.size()), ": cannot listen on ", host, ":", port, " (is the port in use?)"));
  }
  return listener;
}

absl::StatusOr<std::string> ReadPemFile(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) return absl::InvalidArgumentError(absl::StrCat(file.string(), ": cannot read"));
  if (!absl::StrContains(text.str(), "-----BEGIN ")) {
    return absl::InvalidArgumentError(absl::StrCat(file.string(), ": not a PEM file"));
  }
  return text.str();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsFromPem(
    const std::filesystem::path& cert_chain, const std::filesystem::path& private_key) {
  if (cert_chain.empty() && private_key.empty()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options;
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  ASSIGN_OR_RETURN(pair.cert_chain, ReadPemFile(cert_chain));
  ASSIGN_OR_RETURN(pair.private_key, ReadPemFile(private_key));
  options.pem_key_cert_pairs.push_back(std::move(pair));
  return grpc::SslServerCredentials(options);
}

}  // namespace baton::rpc
