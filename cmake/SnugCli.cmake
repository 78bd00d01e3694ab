# The `snug` command (src/cli/*.c), linked to the static library so that the binary runs without libsnug.so,
# and to cJSON (`snug plan --json`). Not defined while src/cli/ has no sources yet.

file(GLOB SNUG_CLI_SOURCES CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/src/cli/*.c")

if(SNUG_CLI_SOURCES)
    pkg_check_modules(CJSON IMPORTED_TARGET libcjson)
    if(NOT CJSON_FOUND)
        message(FATAL_ERROR
            "cJSON not found through pkg-config (module 'libcjson'); the `snug` command needs it for --json.\n"
            "HINT: run `make deps` (Debian/Ubuntu: apt-get install libcjson-dev).")
    endif()
    add_executable(snug ${SNUG_CLI_SOURCES})
    # the name its messages start with (cli/errors.h); snug-bench compiles some of these files with its own
    target_compile_definitions(snug PRIVATE CLI_PROGRAM="snug")
    target_include_directories(snug PRIVATE "${PROJECT_SOURCE_DIR}/src")
    target_link_libraries(snug PRIVATE snug_static PkgConfig::CJSON)
else()
    message(STATUS "snug: src/cli/ has no .c files yet; the `snug` command is not built")
endif()
