// Fuzz target: a *.safetensors file's header (SafetensorsFile::Open), through the real path: the
// input is written to an in-memory file (memfd) that Open maps and validates like one on disk.
//
// Input: the whole file (8-byte little-endian header length, JSON header, data section). A file that
// opens is checked against Open's contract: every tensor's bytes lie inside the mapping and match
// numel x element size, and Get finds every tensor; the target aborts otherwise.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/common/dtype.h"
#include "runtime/model/safetensors.h"

namespace {

using baton::runtime::SafetensorsFile;
using baton::runtime::TensorInfo;

[[noreturn]] void Fail(const char* what, const std::string& name) {
  std::fprintf(stderr, "safetensors contract broken: %s (tensor '%s')\n", what, name.c_str());
  std::abort();
}

// One memfd for the process, rewritten for every input; /proc/self/fd/N opens it by path.
struct MemFile {
  int fd = -1;
  std::string path;
};

const MemFile& TheMemFile() {
  static const MemFile file = [] {
    MemFile f;
    f.fd = memfd_create("safetensors_fuzz", MFD_CLOEXEC);
    if (f.fd < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    f.path = "/proc/self/fd/" + std::to_string(f.fd);
    return f;
  }();
  return file;
}

void CheckContract(const SafetensorsFile& file) {
  for (const TensorInfo& info : file.tensors()) {
    if (!file.Contains(info.data, info.num_bytes)) Fail("data outside the mapping", info.name);
    if (static_cast<uint64_t>(baton::runtime::NumElements(info.shape)) *
            baton::DTypeBytes(info.dtype) != info.num_bytes) {
      Fail("num_bytes is not numel x element size", info.name);
    }
    absl::StatusOr<const TensorInfo*> found = file.Get(info.name);
    if (!found.ok() || *found != &info) Fail("Get does not find the tensor", info.name);
  }
  for (const auto& [name, dtype] : file.unsupported_tensors()) {
    if (file.Get(name).ok()) Fail("Get finds an unsupported tensor", name);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const MemFile& mem = TheMemFile();
  if (ftruncate(mem.fd, 0) != 0 || pwrite(mem.fd, data, size, 0) != static_cast<ssize_t>(size)) {
    std::perror("memfd write");
    std::abort();
  }
  absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(mem.path);
  if (file.ok()) CheckContract(*file);
  return 0;
}
