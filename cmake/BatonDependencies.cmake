# Every third-party package comes from Debian; README.md says why each one is there.
find_package(Threads REQUIRED)
find_package(absl REQUIRED)
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(GTest REQUIRED)
find_package(benchmark REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
find_package(yaml-cpp REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)  # the benchmark's OpenAI client
find_package(Boost 1.74 REQUIRED)  # Asio and Beast (headers): the event-driven HTTP server
find_package(OpenSSL REQUIRED)     # HTTPS on that server
find_package(prometheus-cpp CONFIG REQUIRED)  # the core library and its text serializer only
