# Tests: every tests/test_*.c is one executable and one CTest test of the same name. Other tests/*.c files
# (shared helpers) form a small library that every test links. tests/cli/test_cli.sh, when present, is the
# test `cli`: it gets the built `snug` binary and the MNIST folder as arguments.

enable_testing()

pkg_check_modules(CMOCKA IMPORTED_TARGET cmocka)
if(NOT CMOCKA_FOUND)
    message(FATAL_ERROR
        "cmocka not found through pkg-config (module 'cmocka'); the tests need it.\n"
        "HINT: run `make deps` (Debian/Ubuntu: apt-get install libcmocka-dev), or configure with -DBUILD_TESTING=OFF.")
endif()

set(SNUG_TEST_TIMEOUT 1200 CACHE STRING "Seconds before CTest kills one test (a hang must not stall CI)")

# What every test process sees: two threads (enough to exercise OpenMP without oversubscribing CI machines);
# passive waiting, because spinning OpenMP threads on a loaded machine (parallel builds, other jobs) made a test
# 4-5x slower here (68 s against 15 s); and where the sources and the data are.
set(SNUG_TEST_ENVIRONMENT
    "OMP_NUM_THREADS=2"
    "OMP_WAIT_POLICY=passive"
    "SNUG_SOURCE_DIR=${PROJECT_SOURCE_DIR}"
    "SNUG_DATA_DIR=${SNUG_DATA_DIR}")

file(GLOB SNUG_TEST_SOURCES CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/tests/test_*.c")
file(GLOB SNUG_TEST_HELPER_SOURCES CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/tests/*.c")
list(FILTER SNUG_TEST_HELPER_SOURCES EXCLUDE REGEX "/test_[^/]*\\.c$")

add_library(snug_test_support INTERFACE)
target_include_directories(snug_test_support INTERFACE "${PROJECT_SOURCE_DIR}/src" "${PROJECT_SOURCE_DIR}/tests")
target_compile_definitions(snug_test_support INTERFACE
    SNUG_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    SNUG_DATA_DIR="${SNUG_DATA_DIR}")
target_link_libraries(snug_test_support INTERFACE snug_static PkgConfig::CMOCKA ${SNUG_LIBM_LINK})
if(SNUG_TEST_HELPER_SOURCES)
    add_library(snug_test_helpers STATIC ${SNUG_TEST_HELPER_SOURCES})
    target_link_libraries(snug_test_helpers PUBLIC snug_test_support)
    target_link_libraries(snug_test_support INTERFACE snug_test_helpers)
endif()

foreach(_snug_src IN LISTS SNUG_TEST_SOURCES)
    get_filename_component(_snug_name "${_snug_src}" NAME_WE)
    add_executable(${_snug_name} "${_snug_src}")
    target_link_libraries(${_snug_name} PRIVATE snug_test_support)
    set_target_properties(${_snug_name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${PROJECT_BINARY_DIR}/tests")
    add_test(NAME ${_snug_name} COMMAND ${_snug_name})
    set_tests_properties(${_snug_name} PROPERTIES ENVIRONMENT "${SNUG_TEST_ENVIRONMENT}" TIMEOUT ${SNUG_TEST_TIMEOUT})
endforeach()

set(_snug_cli_test "${PROJECT_SOURCE_DIR}/tests/cli/test_cli.sh")
# Re-run the configure step when the script appears or disappears (the glob is the dependency).
file(GLOB _snug_cli_test_glob CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/tests/cli/test_cli.sh")
if(_snug_cli_test_glob)
    if(TARGET snug)
        find_program(SNUG_BASH bash REQUIRED)
        add_test(NAME cli COMMAND "${SNUG_BASH}" "${_snug_cli_test}" $<TARGET_FILE:snug> "${SNUG_DATA_DIR}")
        set_tests_properties(cli PROPERTIES ENVIRONMENT "${SNUG_TEST_ENVIRONMENT}" TIMEOUT ${SNUG_TEST_TIMEOUT})
    else()
        message(WARNING "tests/cli/test_cli.sh exists but the `snug` command is not built (no src/cli/*.c): test `cli` skipped")
    endif()
endif()
