// The `main` of a fuzz target in the normal (non-libFuzzer) build: runs LLVMFuzzerTestOneInput once
// per file named on the command line, or per regular file under a named directory (recursively, in
// sorted order), and prints how many it ran. ctest runs each target over its corpus this way, so a
// corpus input that crashes fails every CI build, sanitizers or not. Exit status 1 when an argument
// cannot be read or no input was found; a crashing input crashes this process.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

namespace fs = std::filesystem;

// Every regular file that `arg` names, or that lies under it.
bool CollectInputs(const fs::path& arg, std::vector<fs::path>* inputs) {
  std::error_code error;
  if (fs::is_regular_file(arg, error)) {
    inputs->push_back(arg);
    return true;
  }
  if (!fs::is_directory(arg, error)) return false;
  std::vector<fs::path> found;
  for (const fs::directory_entry& entry : fs::recursive_directory_iterator(arg, error)) {
    if (entry.is_regular_file()) found.push_back(entry.path());
  }
  if (error) return false;
  std::sort(found.begin(), found.end());
  inputs->insert(inputs->end(), found.begin(), found.end());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    if (!CollectInputs(argv[i], &inputs)) {
      std::fprintf(stderr, "%s: cannot read %s\n", argv[0], argv[i]);
      return 1;
    }
  }
  for (const fs::path& input : inputs) {
    std::ifstream file(input, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    if (!file.good() && !file.eof()) {
      std::fprintf(stderr, "%s: cannot read %s\n", argv[0], input.c_str());
      return 1;
    }
    // A buffer of exactly the input's size, as libFuzzer passes it: a read past the end is a read
    // past the allocation.
    const std::unique_ptr<uint8_t[]> data(new uint8_t[bytes.size()]);
    std::copy(bytes.begin(), bytes.end(), data.get());
    LLVMFuzzerTestOneInput(data.get(), bytes.size());
  }
  std::printf("%s: ran %zu inputs\n", argv[0], inputs.size());
  return inputs.empty() ? 1 : 0;
}
