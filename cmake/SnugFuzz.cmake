# Fuzz targets: every tests/fuzz/fuzz_NAME.c defines LLVMFuzzerTestOneInput for one parser of untrusted input; its
# seed corpus is tests/fuzz/NAME/corpus/ and its dictionary tests/fuzz/NAME/NAME.dict (docs/testing.md).
#  - Every build with tests: fuzz_NAME_replay, the target over tests/fuzz/replay_main.c, and the CTest test
#    fuzz_NAME that runs it on every file of the corpus (no Clang or libFuzzer needed; under the sanitizer
#    build the inputs run under ASan + UBSan).
#  - The fuzzing build (SNUG_FUZZ=ON, Clang): fuzz_NAME linked with libFuzzer, which scripts/fuzz.sh runs.

# The compute kernels (src/kernels/) parse nothing, and Clang takes many minutes per file to put ASan into their
# AVX-512 code: the fuzzing build compiles them plain. Their memory safety is held by the unit tests, which the
# sanitizer build (make build-asan) runs with the kernels instrumented.
if(SNUG_FUZZ)
    file(GLOB _snug_kernel_sources "${PROJECT_SOURCE_DIR}/src/kernels/*.c")
    set_source_files_properties(${_snug_kernel_sources} PROPERTIES COMPILE_OPTIONS "-fno-sanitize=all")
endif()

file(GLOB SNUG_FUZZ_SOURCES CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/tests/fuzz/fuzz_*.c")
# The flags target parses command lines with the CLI's own parser (and its reading of SNUG_GEMM).
set(_snug_fuzz_cli_sources
    "${PROJECT_SOURCE_DIR}/src/cli/args.c"
    "${PROJECT_SOURCE_DIR}/src/cli/flags.c"
    "${PROJECT_SOURCE_DIR}/src/cli/data_sets.c"
    "${PROJECT_SOURCE_DIR}/src/cli/process_start.c")

foreach(_snug_src IN LISTS SNUG_FUZZ_SOURCES)
    get_filename_component(_snug_name "${_snug_src}" NAME_WE)
    string(REGEX REPLACE "^fuzz_" "" _snug_short "${_snug_name}")
    set(_snug_sources "${_snug_src}")
    if(_snug_short STREQUAL "flags")
        list(APPEND _snug_sources ${_snug_fuzz_cli_sources})
    endif()
    set(_snug_fuzz_exes "")
    if(SNUG_FUZZ)
        add_executable(${_snug_name} ${_snug_sources})
        target_link_options(${_snug_name} PRIVATE -fsanitize=fuzzer)
        list(APPEND _snug_fuzz_exes ${_snug_name})
    endif()
    if(BUILD_TESTING AND NOT SNUG_FUZZ)
        add_executable(${_snug_name}_replay ${_snug_sources} "${PROJECT_SOURCE_DIR}/tests/fuzz/replay_main.c")
        list(APPEND _snug_fuzz_exes ${_snug_name}_replay)
        add_test(NAME ${_snug_name} COMMAND ${_snug_name}_replay "${PROJECT_SOURCE_DIR}/tests/fuzz/${_snug_short}/corpus")
        set_tests_properties(${_snug_name} PROPERTIES ENVIRONMENT "${SNUG_TEST_ENVIRONMENT}" TIMEOUT 300)
    endif()
    foreach(_snug_exe IN LISTS _snug_fuzz_exes)
        target_include_directories(${_snug_exe} PRIVATE "${PROJECT_SOURCE_DIR}/src" "${PROJECT_SOURCE_DIR}/tests/fuzz")
        target_link_libraries(${_snug_exe} PRIVATE snug_static)
        set_target_properties(${_snug_exe} PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${PROJECT_BINARY_DIR}/tests/fuzz")
    endforeach()
endforeach()

# The writers of the valid weights and state seeds and of the valid JPEG seeds (tests/fuzz/make_corpus.py runs
# them); not tests.
if(BUILD_TESTING AND NOT SNUG_FUZZ)
    add_executable(fuzz_make_seeds "${PROJECT_SOURCE_DIR}/tests/fuzz/make_seeds.c")
    target_include_directories(fuzz_make_seeds PRIVATE "${PROJECT_SOURCE_DIR}/src" "${PROJECT_SOURCE_DIR}/tests/fuzz")
    target_link_libraries(fuzz_make_seeds PRIVATE snug_static)
    add_executable(fuzz_make_jpeg_seeds "${PROJECT_SOURCE_DIR}/tests/fuzz/make_jpeg_seeds.c")
    target_link_libraries(fuzz_make_jpeg_seeds PRIVATE PkgConfig::LIBJPEG)
    set_target_properties(fuzz_make_seeds fuzz_make_jpeg_seeds PROPERTIES
        RUNTIME_OUTPUT_DIRECTORY "${PROJECT_BINARY_DIR}/tests/fuzz")
endif()
