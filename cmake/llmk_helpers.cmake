# llmk_helpers.cmake: the dual build of llmk's tests, benchmarks and examples.
#
# Every kernel translation unit (.cu) is built twice:
#   <name>_sim   the host C++ compiler compiles the .cu as C++ with LLMK_SIM defined (through a generated wrapper .cpp
#                that #includes the .cu by absolute path, so diagnostics and std::source_location name the .cu);
#                links llmk::sim; the kernels run in the CPU simulator. CTest label `sim`.
#   <name>_cuda  nvcc compiles the .cu for CMAKE_CUDA_ARCHITECTURES; links CUDA::cudart. CTest label `gpu`; where no
#                GPU exists the test prints "no CUDA GPU: <name>_cuda skipped" and CTest reports it as skipped (77).
#
#   llmk_add_test(NAME <name> SOURCES <a.cu> [<b.cu>...] [SIM_ONLY] [CUDA_ONLY] [OPTIONAL] [ASAN_OPTIMIZE]
#                 [LABELS <label>...] [ARGS <arg>...] [TIMEOUT <seconds>] [COST <n>])
#       doctest test; the sources do not define main (tests/support/test_main.cpp / test_main_cuda.cu do).
#       COST: the CTest scheduling cost of the _sim test (its seconds under TSan, roughly): higher starts first.
#       ASAN_OPTIMIZE: the ASan+UBSan build compiles the _sim test at -O1, not at LLMK_ASAN_OPT (-O0): for the
#       few tests whose run under ASan costs more than the compile -O1 adds (docs/performance.md, "CI time").
#   llmk_add_host_test(NAME <name> SOURCES <a.cpp>... [LABELS <label>...])
#       doctest test of host-only C++ (no LLMK_SIM, no nvcc), built by the plain host compiler, with the
#       sanitizer of the build; CTest labels host;<labels>. Only where the _sim targets are built.
#   llmk_add_compile_fail_tests(PREFIX <prefix> NAME <name> SOURCE <x.cpp> [DEFINES <def>...] LABELS <label>...
#                               CASES "<n>|<regex>"...)
#       Compile-time checks: the host compiler, syntax only, -DLLMK_INVALID_CASE=<n>. Case 0 must compile
#       (test <prefix>_<name>_compiles); every other case must fail with an error matching its regex
#       (<prefix>_invalid_<name>_<n>, through scripts/expect_output.sh). CTest labels sim;<labels>.
#   llmk_add_benchmark(NAME <name> SOURCES <a.cu>... [SIM_ONLY] [CUDA_ONLY] [OPTIONAL] [CUSTOM_MAIN])
#       Google Benchmark; links benchmark::benchmark_main unless CUSTOM_MAIN (then the sources define main).
#       Benchmarks are built, not registered with CTest.
#   llmk_add_example(NAME <name> SOURCES <a.cu>... [SIM_ONLY] [CUDA_ONLY] [OPTIONAL] [NO_TEST]
#                    [ARGS <arg>...] [LABELS <label>...] [TIMEOUT <seconds>])
#       A program with its own main. Unless NO_TEST, <name>_sim is registered as a CTest test (labels sim;example).
#   llmk_add_planted_test(NAME <name> SOURCE <x.cu> [SANITIZER none|address|thread] EXPECT <regex>... [EXIT_NONZERO]
#                         [OPTIONAL] [LABELS <label>...] [TIMEOUT <seconds>])
#       A planted-bug program (its own main, no doctest), built as <name>_sim only in the build whose LLMK_SANITIZE
#       matches SANITIZER (none = the plain build). The test passes only if the program's combined stdout+stderr
#       matches every EXPECT regex, in order (scripts/expect_output.sh: POSIX extended regexes, matched line by
#       line; each regex must match on the line of the previous match or a later one), and, with EXIT_NONZERO, the
#       program exits non-zero. Regexes cannot contain ';' (a CMake list separator) and CMake string escapes apply
#       ("\\." for a literal dot).
#
# OPTIONAL: when a source file does not exist the target is skipped with a message instead of failing the configure
# (used while the tests are being written; drop it once the file exists).
#
# In a sanitizer build (LLMK_SANITIZE=address|thread) the _sim targets get the sanitizer flags, their tests the
# labels asan/tsan, the environment LLMK_TEST_FAST=1 (tests may shrink their sizes) and sanitizer options; no _cuda
# target is built.
include_guard(GLOBAL)

set(LLMK_SIM_WARNINGS "-Wall;-Wextra;-Wno-unknown-pragmas" CACHE STRING
    "Host compiler warning flags for llmk's own _sim targets (#pragma unroll is for nvcc)")
set(LLMK_CUDA_FLAGS "--expt-relaxed-constexpr;-lineinfo" CACHE STRING "Extra nvcc flags for llmk's own _cuda targets")
set(LLMK_TEST_TIMEOUT 900 CACHE STRING "Default CTest timeout (seconds) of llmk's tests")
option(LLMK_RESOURCE_REPORTS "Keep ptxas's resource report of every _cuda object (<object>.ptxas) for the static gates" ON)

get_filename_component(LLMK_ROOT_DIR "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)

# ---------------------------------------------------------------------------------------------------------------------
# Internals
# ---------------------------------------------------------------------------------------------------------------------

# Absolute paths of `sources` (relative ones are relative to the calling CMakeLists' directory).
function(_llmk_absolute_sources out_var)
  set(result)
  foreach(src IN LISTS ARGN)
    cmake_path(ABSOLUTE_PATH src BASE_DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}" NORMALIZE OUTPUT_VARIABLE abs)
    list(APPEND result "${abs}")
  endforeach()
  set(${out_var} ${result} PARENT_SCOPE)
endfunction()

# Sets `out_var` to TRUE when every source exists; otherwise FALSE, after a message naming the first missing one.
function(_llmk_sources_exist out_var kind name)
  foreach(src IN LISTS ARGN)
    if(NOT EXISTS "${src}")
      file(RELATIVE_PATH rel "${LLMK_ROOT_DIR}" "${src}")
      message(STATUS "llmk: skipping ${kind} ${name}: ${rel} does not exist (yet)")
      set(${out_var} FALSE PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(${out_var} TRUE PARENT_SCOPE)
endfunction()

# For the simulator: every .cu becomes a generated .cpp that #includes it; other sources pass through.
function(_llmk_sim_sources out_var target)
  set(result)
  foreach(src IN LISTS ARGN)
    if(src MATCHES "\\.cu$")
      cmake_path(GET src FILENAME fname)
      set(gen "${CMAKE_CURRENT_BINARY_DIR}/llmk_sim/${target}/${fname}.cpp")
      if(gen IN_LIST result)
        message(FATAL_ERROR "llmk: ${target}: two sources named ${fname}")
      endif()
      # file(CONFIGURE) rewrites the wrapper only when its content changes: no rebuild on every configure.
      file(CONFIGURE OUTPUT "${gen}" CONTENT
        "// Generated by cmake/llmk_helpers.cmake: ${fname} built for the simulator backend (LLMK_SIM).\n#include \"${src}\"\n"
        @ONLY)
      list(APPEND result "${gen}")
    else()
      list(APPEND result "${src}")
    endif()
  endforeach()
  set(${out_var} ${result} PARENT_SCOPE)
endfunction()

# Sanitizer builds compile with line tables only (-g1): their reports need function names and file:line, not
# variables. TSan compiles at -O1 (its runs cost more than its compiles); ASan+UBSan at LLMK_ASAN_OPT (-O0: its
# instrumented compile at -O1 took twice as long, and most of its tests run for seconds; the long-running ones
# opt back into -O1 with llmk_add_test's ASAN_OPTIMIZE). docs/performance.md, "CI time", has the measurements.
function(_llmk_apply_sanitizer target)
  if(LLMK_SANITIZE STREQUAL "address")
    target_compile_options(${target} PRIVATE
      -fsanitize=address,undefined,float-cast-overflow -fno-omit-frame-pointer
      -fno-sanitize-recover=undefined,float-cast-overflow ${LLMK_ASAN_OPT} -g1)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined,float-cast-overflow)
  elseif(LLMK_SANITIZE STREQUAL "thread")
    target_compile_options(${target} PRIVATE -fsanitize=thread -O1 -g1)
    if(LLMK_TSAN_CLANG_RT)  # clang's runtime under g++'s instrumentation (CMakeLists.txt says why)
      target_link_options(${target} PRIVATE
        "LINKER:--whole-archive,${LLMK_TSAN_CLANG_RT},--no-whole-archive"
        "LINKER:--dynamic-list=${LLMK_TSAN_CLANG_RT}.syms"
        "LINKER:--whole-archive,${LLMK_TSAN_CLANG_RT_CXX},--no-whole-archive"
        "LINKER:--dynamic-list=${LLMK_TSAN_CLANG_RT_CXX}.syms")
      target_link_libraries(${target} PRIVATE pthread rt dl m)
    else()
      target_link_options(${target} PRIVATE -fsanitize=thread)
    endif()
  endif()
endfunction()

# Replaces the default RelWithDebInfo flags ("-O2 -g -DNDEBUG") of the calling directory by host optimization
# `opt` with line tables only (-g1): tests/ (-O1) and bench/ (-O2) use it to cut compile time (docs/testing.md).
# nvcc's -O and -g are host-only: device code, -lineinfo and what the static gates read do not change. Flags set
# by hand are kept.
function(llmk_lean_host_flags opt)
  if(CMAKE_CXX_FLAGS_RELWITHDEBINFO STREQUAL "-O2 -g -DNDEBUG")
    set(CMAKE_CXX_FLAGS_RELWITHDEBINFO "${opt} -g1 -DNDEBUG" PARENT_SCOPE)
  endif()
  if(CMAKE_CUDA_FLAGS_RELWITHDEBINFO STREQUAL "-O2 -g -DNDEBUG")
    set(CMAKE_CUDA_FLAGS_RELWITHDEBINFO "${opt} -Xcompiler=-g1 -DNDEBUG" PARENT_SCOPE)
  endif()
endfunction()

# Tests and examples keep assert() live even in RelWithDebInfo/Release (-DNDEBUG comes from the build type).
function(_llmk_keep_asserts target)
  target_compile_options(${target} PRIVATE -UNDEBUG)
endfunction()

function(_llmk_setup_sim_target target)
  if(NOT TARGET llmk::sim)
    message(FATAL_ERROR "llmk: ${target} needs llmk::sim (Boost.Context): run scripts/setup.sh")
  endif()
  target_link_libraries(${target} PRIVATE llmk::sim)
  target_include_directories(${target} PRIVATE "${LLMK_ROOT_DIR}/tests")
  target_compile_options(${target} PRIVATE ${LLMK_SIM_WARNINGS})
  set_target_properties(${target} PROPERTIES CXX_EXTENSIONS OFF)
  _llmk_apply_sanitizer(${target})
endfunction()

# The launcher keeps ptxas's resource report of every object (<object>.ptxas) for the static performance gates
# (scripts/perf/static_gates.sh), which read those reports and the objects' SASS instead of compiling again.
function(_llmk_cuda_launcher target)
  if(LLMK_RESOURCE_REPORTS)
    set(launcher "${LLMK_ROOT_DIR}/scripts/perf/nvcc_resource_log.sh")
    if(CMAKE_CUDA_COMPILER_LAUNCHER)
      list(APPEND launcher ${CMAKE_CUDA_COMPILER_LAUNCHER})  # ccache after the report keeper
    endif()
    set_target_properties(${target} PROPERTIES CUDA_COMPILER_LAUNCHER "${launcher}")
  endif()
endfunction()

function(_llmk_setup_cuda_target target)
  target_link_libraries(${target} PRIVATE llmk::llmk CUDA::cudart)
  target_include_directories(${target} PRIVATE "${LLMK_ROOT_DIR}/tests")
  target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CUDA>:${LLMK_CUDA_FLAGS}>")
  set_target_properties(${target} PROPERTIES
    CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}"
    CUDA_EXTENSIONS OFF
    CXX_EXTENSIONS OFF)
  _llmk_cuda_launcher(${target})
endfunction()

# Environment and labels of a test that runs a _sim program.
function(_llmk_sim_test_properties test labels timeout)
  if(NOT timeout)
    set(timeout ${LLMK_TEST_TIMEOUT})
  endif()
  # One BLAS thread: OpenBLAS's own threads would oversubscribe ctest -j and are invisible to TSan.
  set(env "OPENBLAS_NUM_THREADS=1")
  if(LLMK_SANITIZE STREQUAL "address")
    list(APPEND labels asan)
    list(APPEND env
      "ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1:check_initialization_order=1"
      "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1"
      "LLMK_TEST_FAST=1")
  elseif(LLMK_SANITIZE STREQUAL "thread")
    list(APPEND labels tsan)
    list(APPEND env "TSAN_OPTIONS=second_deadlock_stack=1" "LLMK_TEST_FAST=1")
  endif()
  set_tests_properties(${test} PROPERTIES LABELS "sim;${labels}" TIMEOUT ${timeout})
  if(env)
    set_tests_properties(${test} PROPERTIES ENVIRONMENT "${env}")
  endif()
endfunction()

# doctest mains, built once per build tree.
function(_llmk_test_mains)
  if(NOT TARGET doctest::doctest)
    message(FATAL_ERROR "llmk: doctest::doctest is not defined: tests/CMakeLists.txt finds doctest (doctest-dev)")
  endif()
  if(LLMK_SIM_TARGETS AND NOT TARGET llmk_test_main_sim)
    add_library(llmk_test_main_sim STATIC "${LLMK_ROOT_DIR}/tests/support/test_main.cpp")
    target_link_libraries(llmk_test_main_sim PUBLIC doctest::doctest)
    target_compile_features(llmk_test_main_sim PUBLIC cxx_std_20)
    set_target_properties(llmk_test_main_sim PROPERTIES CXX_EXTENSIONS OFF)
    _llmk_apply_sanitizer(llmk_test_main_sim)
  endif()
  if(LLMK_CUDA_ENABLED AND NOT TARGET llmk_test_main_cuda)
    add_library(llmk_test_main_cuda STATIC "${LLMK_ROOT_DIR}/tests/support/test_main_cuda.cu")
    # llmk::llmk brings -std=c++20 and cxx_std_20; without a standard requirement CMake would append its
    # default -std=c++17 after it (CUDA_EXTENSIONS OFF differs from nvcc's default) and nvcc keeps the last.
    target_link_libraries(llmk_test_main_cuda PUBLIC doctest::doctest CUDA::cudart PRIVATE llmk::llmk)
    # Host code only: one architecture is enough and keeps this nvcc compile short.
    list(GET CMAKE_CUDA_ARCHITECTURES 0 first_arch)
    set_target_properties(llmk_test_main_cuda PROPERTIES CUDA_ARCHITECTURES "${first_arch}" CUDA_EXTENSIONS OFF)
  endif()
endfunction()

# ---------------------------------------------------------------------------------------------------------------------
# Public functions
# ---------------------------------------------------------------------------------------------------------------------

# CUDA_ARCHS: the _cuda target's architectures instead of CMAKE_CUDA_ARCHITECTURES (e.g. 90a for tests of the
# sm_90a-only atoms; the device build of scripts/gpu_validate.sh uses 90a on Hopper as well).
function(llmk_add_test)
  cmake_parse_arguments(PARSE_ARGV 0 arg "SIM_ONLY;CUDA_ONLY;OPTIONAL;ASAN_OPTIMIZE" "NAME;TIMEOUT;COST"
                        "SOURCES;LABELS;ARGS;CUDA_ARCHS")
  if(NOT arg_NAME OR NOT arg_SOURCES)
    message(FATAL_ERROR "llmk_add_test(NAME <name> SOURCES <files>...): NAME and SOURCES are required")
  endif()
  if(arg_SIM_ONLY AND arg_CUDA_ONLY)
    message(FATAL_ERROR "llmk_add_test(${arg_NAME}): SIM_ONLY and CUDA_ONLY exclude each other")
  endif()
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "llmk_add_test(${arg_NAME}): unknown arguments ${arg_UNPARSED_ARGUMENTS}")
  endif()
  _llmk_absolute_sources(sources ${arg_SOURCES})
  if(arg_OPTIONAL)
    _llmk_sources_exist(ok test ${arg_NAME} ${sources})
    if(NOT ok)
      return()
    endif()
  endif()
  _llmk_test_mains()

  if(NOT arg_CUDA_ONLY AND LLMK_SIM_TARGETS)
    set(target ${arg_NAME}_sim)
    _llmk_sim_sources(sim_sources ${target} ${sources})
    add_executable(${target} ${sim_sources})
    _llmk_setup_sim_target(${target})
    if(arg_ASAN_OPTIMIZE AND LLMK_SANITIZE STREQUAL "address")
      target_compile_options(${target} PRIVATE -O1)  # after LLMK_ASAN_OPT: the last -O wins
    endif()
    _llmk_keep_asserts(${target})
    target_link_libraries(${target} PRIVATE llmk_test_main_sim doctest::doctest)
    add_test(NAME ${target} COMMAND ${target} ${arg_ARGS})
    _llmk_sim_test_properties(${target} "${arg_LABELS}" "${arg_TIMEOUT}")
    if(arg_COST)
      # A cold CTest has no timings: the long simulator tests start first, so -j2 does not end on one of them.
      set_tests_properties(${target} PROPERTIES COST ${arg_COST})
    endif()
  endif()

  if(NOT arg_SIM_ONLY AND LLMK_CUDA_ENABLED)
    set(target ${arg_NAME}_cuda)
    add_executable(${target} ${sources})
    _llmk_setup_cuda_target(${target})
    if(arg_CUDA_ARCHS)
      set_target_properties(${target} PROPERTIES CUDA_ARCHITECTURES "${arg_CUDA_ARCHS}")
    endif()
    _llmk_keep_asserts(${target})
    target_link_libraries(${target} PRIVATE llmk_test_main_cuda doctest::doctest)
    add_test(NAME ${target} COMMAND ${target} ${arg_ARGS})
    set(timeout ${arg_TIMEOUT})
    if(NOT timeout)
      set(timeout ${LLMK_TEST_TIMEOUT})
    endif()
    set_tests_properties(${target} PROPERTIES LABELS "gpu;${arg_LABELS}" SKIP_RETURN_CODE 77 TIMEOUT ${timeout})
  endif()
endfunction()

function(llmk_add_host_test)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "NAME" "SOURCES;LABELS")
  if(NOT arg_NAME OR NOT arg_SOURCES OR arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "llmk_add_host_test(NAME <name> SOURCES <files>... [LABELS <label>...])")
  endif()
  _llmk_test_mains()
  if(NOT TARGET llmk_test_main_sim)
    return()
  endif()
  add_executable(${arg_NAME} ${arg_SOURCES})
  target_link_libraries(${arg_NAME} PRIVATE llmk::llmk llmk_test_main_sim)
  target_include_directories(${arg_NAME} PRIVATE "${LLMK_ROOT_DIR}/tests")
  target_compile_options(${arg_NAME} PRIVATE ${LLMK_SIM_WARNINGS} -UNDEBUG)
  set_target_properties(${arg_NAME} PROPERTIES CXX_EXTENSIONS OFF)
  _llmk_apply_sanitizer(${arg_NAME})
  add_test(NAME ${arg_NAME} COMMAND ${arg_NAME})
  _llmk_sim_test_properties(${arg_NAME} "${arg_LABELS};host" "")
endfunction()

function(llmk_add_compile_fail_tests)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "PREFIX;NAME;SOURCE" "DEFINES;LABELS;CASES")
  if(NOT arg_PREFIX OR NOT arg_NAME OR NOT arg_SOURCE OR NOT arg_CASES OR arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "llmk_add_compile_fail_tests(PREFIX <p> NAME <n> SOURCE <x.cpp> [DEFINES <d>...] "
                        "LABELS <l>... CASES \"<n>|<regex>\"...)")
  endif()
  cmake_path(ABSOLUTE_PATH arg_SOURCE BASE_DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}" NORMALIZE)
  list(TRANSFORM arg_DEFINES PREPEND "-D")
  foreach(entry IN LISTS arg_CASES)
    string(REPLACE "|" ";" parts "${entry}")
    list(GET parts 0 case)
    set(compile ${CMAKE_CXX_COMPILER} -std=c++20 -fsyntax-only -I${LLMK_ROOT_DIR}/include ${arg_DEFINES}
        -DLLMK_INVALID_CASE=${case} ${arg_SOURCE})
    if(case EQUAL 0)
      set(test_name ${arg_PREFIX}_${arg_NAME}_compiles)
      add_test(NAME ${test_name} COMMAND ${compile})
    else()
      list(GET parts 1 message)
      set(test_name ${arg_PREFIX}_invalid_${arg_NAME}_${case})
      add_test(NAME ${test_name}
               COMMAND ${LLMK_ROOT_DIR}/scripts/expect_output.sh --exit nonzero -e "${message}" -- ${compile})
    endif()
    set_tests_properties(${test_name} PROPERTIES LABELS "sim;${arg_LABELS}")
  endforeach()
endfunction()

function(llmk_add_benchmark)
  cmake_parse_arguments(PARSE_ARGV 0 arg "SIM_ONLY;CUDA_ONLY;OPTIONAL;CUSTOM_MAIN" "NAME" "SOURCES")
  if(NOT arg_NAME OR NOT arg_SOURCES)
    message(FATAL_ERROR "llmk_add_benchmark(NAME <name> SOURCES <files>...): NAME and SOURCES are required")
  endif()
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "llmk_add_benchmark(${arg_NAME}): unknown arguments ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT TARGET benchmark::benchmark)
    message(FATAL_ERROR "llmk: benchmark::benchmark is not defined: bench/CMakeLists.txt finds Google Benchmark "
                        "(libbenchmark-dev)")
  endif()
  _llmk_absolute_sources(sources ${arg_SOURCES})
  if(arg_OPTIONAL)
    _llmk_sources_exist(ok benchmark ${arg_NAME} ${sources})
    if(NOT ok)
      return()
    endif()
  endif()
  if(arg_CUSTOM_MAIN)
    set(bench_lib benchmark::benchmark)
  else()
    set(bench_lib benchmark::benchmark_main)
  endif()

  if(NOT arg_CUDA_ONLY AND LLMK_SIM_TARGETS AND LLMK_BUILD_SIM_BENCHMARKS)
    set(target ${arg_NAME}_sim)
    _llmk_sim_sources(sim_sources ${target} ${sources})
    add_executable(${target} ${sim_sources})
    _llmk_setup_sim_target(${target})
    target_link_libraries(${target} PRIVATE ${bench_lib})
  endif()
  if(NOT arg_SIM_ONLY AND LLMK_CUDA_ENABLED)
    set(target ${arg_NAME}_cuda)
    add_executable(${target} ${sources})
    _llmk_setup_cuda_target(${target})
    target_link_libraries(${target} PRIVATE ${bench_lib})
  endif()
endfunction()

function(llmk_add_example)
  cmake_parse_arguments(PARSE_ARGV 0 arg "SIM_ONLY;CUDA_ONLY;OPTIONAL;NO_TEST" "NAME;TIMEOUT" "SOURCES;ARGS;LABELS")
  if(NOT arg_NAME OR NOT arg_SOURCES)
    message(FATAL_ERROR "llmk_add_example(NAME <name> SOURCES <files>...): NAME and SOURCES are required")
  endif()
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "llmk_add_example(${arg_NAME}): unknown arguments ${arg_UNPARSED_ARGUMENTS}")
  endif()
  _llmk_absolute_sources(sources ${arg_SOURCES})
  if(arg_OPTIONAL)
    _llmk_sources_exist(ok example ${arg_NAME} ${sources})
    if(NOT ok)
      return()
    endif()
  endif()

  if(NOT arg_CUDA_ONLY AND LLMK_SIM_TARGETS)
    set(target ${arg_NAME}_sim)
    _llmk_sim_sources(sim_sources ${target} ${sources})
    add_executable(${target} ${sim_sources})
    _llmk_setup_sim_target(${target})
    _llmk_keep_asserts(${target})
    if(NOT arg_NO_TEST)
      add_test(NAME ${target} COMMAND ${target} ${arg_ARGS})
      _llmk_sim_test_properties(${target} "example;${arg_LABELS}" "${arg_TIMEOUT}")
    endif()
  endif()
  if(NOT arg_SIM_ONLY AND LLMK_CUDA_ENABLED)
    set(target ${arg_NAME}_cuda)
    add_executable(${target} ${sources})
    _llmk_setup_cuda_target(${target})
    _llmk_keep_asserts(${target})
  endif()
endfunction()

function(llmk_add_planted_test)
  cmake_parse_arguments(PARSE_ARGV 0 arg "EXIT_NONZERO;OPTIONAL" "NAME;SOURCE;SANITIZER;TIMEOUT" "EXPECT;LABELS")
  if(NOT arg_NAME OR NOT arg_SOURCE OR NOT arg_EXPECT)
    message(FATAL_ERROR
      "llmk_add_planted_test(NAME <name> SOURCE <x.cu> [SANITIZER none|address|thread] EXPECT <regex>...): "
      "NAME, SOURCE and EXPECT are required")
  endif()
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "llmk_add_planted_test(${arg_NAME}): unknown arguments ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT arg_SANITIZER)
    set(arg_SANITIZER none)
  endif()
  if(NOT arg_SANITIZER MATCHES "^(none|address|thread)$")
    message(FATAL_ERROR "llmk_add_planted_test(${arg_NAME}): SANITIZER must be none, address or thread")
  endif()
  set(wanted "${arg_SANITIZER}")
  if(wanted STREQUAL "none")
    set(wanted "")
  endif()
  if(NOT LLMK_SANITIZE STREQUAL wanted OR NOT LLMK_SIM_TARGETS)
    return()  # built in the other build (plain, ASan or TSan); none without simulator targets
  endif()
  _llmk_absolute_sources(sources ${arg_SOURCE})
  if(arg_OPTIONAL)
    _llmk_sources_exist(ok "planted test" ${arg_NAME} ${sources})
    if(NOT ok)
      return()
    endif()
  endif()

  set(target ${arg_NAME}_sim)
  _llmk_sim_sources(sim_sources ${target} ${sources})
  add_executable(${target} ${sim_sources})
  _llmk_setup_sim_target(${target})
  _llmk_keep_asserts(${target})

  set(cmd bash "${LLMK_ROOT_DIR}/scripts/expect_output.sh")
  if(arg_EXIT_NONZERO)
    list(APPEND cmd --exit nonzero)
  endif()
  foreach(re IN LISTS arg_EXPECT)
    list(APPEND cmd -e "${re}")
  endforeach()
  add_test(NAME ${target} COMMAND ${cmd} -- $<TARGET_FILE:${target}>)
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 300)  # a planted deadlock the simulator misses must not hold CI for long
  endif()
  _llmk_sim_test_properties(${target} "planted;${arg_LABELS}" "${arg_TIMEOUT}")
endfunction()
