#include "runtime/rpc/reflection_v1_service.h"

#include <set>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"

namespace baton::rpc {
namespace {

namespace v1 = grpc::reflection::v1;
using google::protobuf::Descriptor;
using google::protobuf::DescriptorPool;
using google::protobuf::FieldDescriptor;
using google::protobuf::FileDescriptor;

void Error(v1::ServerReflectionResponse* response, grpc::StatusCode code, const std::string& message) {
  response->mutable_error_response()->set_error_code(code);
  response->mutable_error_response()->set_error_message(message);
}

// `file` and, depth first, every file it imports that `sent` does not hold yet.
void AddFile(const FileDescriptor* file, std::set<std::string>* sent, v1::FileDescriptorResponse* out) {
  if (!sent->insert(file->name()).second) return;
  google::protobuf::FileDescriptorProto proto;
  file->CopyTo(&proto);
  out->add_file_descriptor_proto(proto.SerializeAsString());
  for (int i = 0; i < file->dependency_count(); ++i) AddFile(file->dependency(i), sent, out);
}

void AddWithImports(const FileDescriptor* file, std::set<std::string>* files) {
  if (!files->insert(file->name()).second) return;
  for (int i = 0; i < file->dependency_count(); ++i) AddWithImports(file->dependency(i), files);
}

}  // namespace

ReflectionV1Service::ReflectionV1Service(std::vector<std::string> service_names, Authorize authorize)
    : service_names_(std::move(service_names)), authorize_(std::move(authorize)) {
  for (const std::string& name : service_names_) {
    // A service whose descriptor this binary does not hold (gRPC's health, in upb) has no file to send.
    if (const auto* service = DescriptorPool::generated_pool()->FindServiceByName(name)) {
      AddWithImports(service->file(), &served_files_);
    }
  }
}

v1::ServerReflectionResponse ReflectionV1Service::Answer(const v1::ServerReflectionRequest& request) const {
  const DescriptorPool* pool = DescriptorPool::generated_pool();
  v1::ServerReflectionResponse response;
  response.set_valid_host(request.host());
  *response.mutable_original_request() = request;
  std::set<std::string> sent;
  auto send_file = [&](const FileDescriptor* file, const std::string& what) {
    if (file == nullptr || !served_files_.contains(file->name())) {
      return Error(&response, grpc::StatusCode::NOT_FOUND, what + " not found");
    }
    AddFile(file, &sent, response.mutable_file_descriptor_response());
  };
  switch (request.message_request_case()) {
    case v1::ServerReflectionRequest::kListServices:
      for (const std::string& name : service_names_) {
        response.mutable_list_services_response()->add_service()->set_name(name);
      }
      break;
    case v1::ServerReflectionRequest::kFileByFilename:
      send_file(pool->FindFileByName(request.file_by_filename()), "file " + request.file_by_filename());
      break;
    case v1::ServerReflectionRequest::kFileContainingSymbol:
      send_file(pool->FindFileContainingSymbol(request.file_containing_symbol()),
                "symbol " + request.file_containing_symbol());
      break;
    case v1::ServerReflectionRequest::kFileContainingExtension: {
      const v1::ExtensionRequest& ext = request.file_containing_extension();
      const Descriptor* type = pool->FindMessageTypeByName(ext.containing_type());
      if (type == nullptr) {
        Error(&response, grpc::StatusCode::NOT_FOUND, "type " + ext.containing_type() + " not found");
        break;
      }
      const FieldDescriptor* field = pool->FindExtensionByNumber(type, ext.extension_number());
      send_file(field ? field->file() : nullptr,
                "extension " + std::to_string(ext.extension_number()) + " of " + ext.containing_type());
      break;
    }
    case v1::ServerReflectionRequest::kAllExtensionNumbersOfType: {
      const Descriptor* type = pool->FindMessageTypeByName(request.all_extension_numbers_of_type());
      if (type == nullptr) {
        Error(&response, grpc::StatusCode::NOT_FOUND,
              "type " + request.all_extension_numbers_of_type() + " not found");
        break;
      }
      std::vector<const FieldDescriptor*> extensions;
      pool->FindAllExtensions(type, &extensions);
      v1::ExtensionNumberResponse* numbers = response.mutable_all_extension_numbers_response();
      numbers->set_base_type_name(type->full_name());
      for (const FieldDescriptor* extension : extensions) numbers->add_extension_number(extension->number());
      break;
    }
    case v1::ServerReflectionRequest::MESSAGE_REQUEST_NOT_SET:
      Error(&response, grpc::StatusCode::INVALID_ARGUMENT, "the request names no message_request");
      break;
  }
  return response;
}

grpc::Status ReflectionV1Service::ServerReflectionInfo(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::ServerReflectionResponse, v1::ServerReflectionRequest>* stream) {
  if (authorize_) {
    if (grpc::Status admitted = authorize_(*context); !admitted.ok()) return admitted;
  }
  v1::ServerReflectionRequest request;
  while (stream->Read(&request)) {
    if (!stream->Write(Answer(request))) break;
  }
  return grpc::Status::OK;
}

ReflectionV1AlphaService::ReflectionV1AlphaService(ReflectionV1Service* v1) {
  using Stream = grpc::ServerReaderWriter<v1::ServerReflectionResponse, v1::ServerReflectionRequest>;
  // As generated code registers a method, under v1alpha's name.
  AddMethod(new grpc::internal::RpcServiceMethod(
      "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", grpc::internal::RpcMethod::BIDI_STREAMING,
      new grpc::internal::BidiStreamingHandler<ReflectionV1Service, v1::ServerReflectionRequest,
                                               v1::ServerReflectionResponse>(
          [](ReflectionV1Service* service, grpc::ServerContext* context, Stream* stream) {
            return service->ServerReflectionInfo(context, stream);
          },
          v1)));
}

}  // namespace baton::rpc
