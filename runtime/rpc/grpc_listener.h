// How every Baton gRPC server listens: on one address, serving the given services, never sharing
// its port, answering a request that does not parse with INVALID_ARGUMENT
// (malformed_request_interceptor.h). gRPC sets SO_REUSEPORT unless told not to, which let a second deployment started on
// the same ports take half of the first one's traffic and register its workers; here a port in use
// is an error that names it.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"

namespace baton::rpc {

struct GrpcListener {
  std::unique_ptr<grpc::Server> server;
  int port = 0;  // the bound port (the one asked for, or the one picked for port 0)
};

// Builds and starts a server on host:port (0 picks a free port) serving `services`, which must
// outlive it. Unavailable, naming `what` and the address, when the port cannot be bound.
absl::StatusOr<GrpcListener> ListenExclusive(std::string_view what, const std::string& host, int port,
                                             const std::vector<grpc::Service*>& services,
                                             std::shared_ptr<grpc::ServerCredentials> credentials =
                                                 grpc::InsecureServerCredentials());

// TLS server credentials from a PEM certificate chain and its private key; plain-text credentials
// when both paths are empty. InvalidArgument naming the file when one cannot be read or is not PEM.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsFromPem(
    const std::filesystem::path& cert_chain, const std::filesystem::path& private_key);

// A PEM file's text; InvalidArgument naming the file when it cannot be read or holds no PEM block.
absl::StatusOr<std::string> ReadPemFile(const std::filesystem::path& file);

}  // namespace baton::rpc
