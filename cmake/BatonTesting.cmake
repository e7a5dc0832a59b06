# baton_add_test(<source.cc> [LABELS l...] [LIBS lib...])
# One executable per test file, named after it, registered with ctest through gtest_discover_tests.
# Labels: cpu (the default: runs everywhere), gpu (needs a CUDA device; skips, saying why, without
# one), multi_gpu (needs two).
include(GoogleTest)
function(baton_add_test src)
  cmake_parse_arguments(ARG "" "" "LABELS;LIBS" ${ARGN})
  get_filename_component(name ${src} NAME_WE)
  add_executable(${name} ${src})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} baton_testing GTest::gmock GTest::gtest_main)
  # Files of the source tree (the shipped model, the workloads): a compile definition, since the
  # discovered tests' ENVIRONMENT takes one variable only (CMake 3.25 flattens a list there).
  target_compile_definitions(${name} PRIVATE BATON_TEST_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  if(NOT ARG_LABELS)
    set(ARG_LABELS cpu)
  endif()
  gtest_discover_tests(${name}
    PROPERTIES LABELS "${ARG_LABELS}"
    ENVIRONMENT "BATON_TEST_DATA=${CMAKE_BINARY_DIR}/testdata"
    DISCOVERY_TIMEOUT 60)
endfunction()
