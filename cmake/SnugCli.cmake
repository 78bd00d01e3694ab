# The `snug` command (src/cli/*.c), linked to the static library so that the binary runs without libsnug.so.
# Not defined while src/cli/ has no sources yet.

file(GLOB SNUG_CLI_SOURCES CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/src/cli/*.c")

if(SNUG_CLI_SOURCES)
    add_executable(snug ${SNUG_CLI_SOURCES})
    target_include_directories(snug PRIVATE "${PROJECT_SOURCE_DIR}/src")
    target_link_libraries(snug PRIVATE snug_static)
else()
    message(STATUS "snug: src/cli/ has no .c files yet; the `snug` command is not built")
endif()
