// A request whose bytes do not parse as its method's message (a proto3 string field holding invalid
// UTF-8, or bytes that are not protobuf at all) gets INVALID_ARGUMENT naming the method, on every
// Baton gRPC server (ListenExclusive installs it). gRPC itself answers such a request INTERNAL with
// an empty message — a server fault, to a client that sent garbage — before any handler runs.
//
// How it tells: gRPC's deserializer fails with INTERNAL and the message's InitializationErrorString,
// which is empty for proto3 (no required fields); no Baton handler ends a call INTERNAL without a
// message.
#pragma once

#include <memory>

#include "grpcpp/support/server_interceptor.h"

namespace baton::rpc {

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MalformedRequestInterceptorFactory();

}  // namespace baton::rpc
