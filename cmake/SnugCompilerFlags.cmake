# Language level, build type, warnings and sanitizers: applies to every target in the project.

set(CMAKE_C_STANDARD 11)
set(CMAKE_C_STANDARD_REQUIRED ON)
set(CMAKE_C_EXTENSIONS OFF)
set(CMAKE_EXPORT_COMPILE_COMMANDS ON)

# Release by default: an unoptimised training engine is too slow to be useful. No -march, so that the binaries
# run on any x86-64 (or other) machine of the same architecture; CMake's Release flags are -O3 -DNDEBUG.
get_property(_snug_multi_config GLOBAL PROPERTY GENERATOR_IS_MULTI_CONFIG)
if(NOT _snug_multi_config AND NOT CMAKE_BUILD_TYPE)
    set(CMAKE_BUILD_TYPE Release CACHE STRING "Build type: Release, Debug, RelWithDebInfo or MinSizeRel" FORCE)
endif()

if(CMAKE_C_COMPILER_ID MATCHES "GNU|Clang")
    add_compile_options(-Wall -Wextra -Wpedantic)
    # A pointer of the wrong type or a call without a declaration is a bug, never a style question.
    add_compile_options(-Werror=incompatible-pointer-types -Werror=implicit-function-declaration
                        -Werror=int-conversion)
    # errno is never read after a math call here; without this flag GCC keeps a branch around sqrtf that
    # stops the optimizer loops from vectorising.
    add_compile_options(-fno-math-errno)
endif()

if(SNUG_SANITIZE)
    if(NOT CMAKE_C_COMPILER_ID MATCHES "GNU|Clang")
        message(FATAL_ERROR "SNUG_SANITIZE=ON needs GCC or Clang (compiler here: ${CMAKE_C_COMPILER_ID})")
    endif()
    set(_snug_sanitize_flags -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
    add_compile_options(${_snug_sanitize_flags})
    add_link_options(${_snug_sanitize_flags})
endif()

# The fuzzing build (`make fuzz`, scripts/fuzz.sh; cmake/SnugFuzz.cmake): every object instrumented for
# libFuzzer's coverage and checked by ASan + UBSan; only the fuzz targets link libFuzzer itself.
option(SNUG_FUZZ "Build the libFuzzer targets of tests/fuzz/ (Clang only)" OFF)
if(SNUG_FUZZ)
    if(NOT CMAKE_C_COMPILER_ID STREQUAL "Clang")
        message(FATAL_ERROR "SNUG_FUZZ=ON needs Clang (compiler here: ${CMAKE_C_COMPILER_ID}); "
                "configure with CC=clang-16 (scripts/install-deps.sh --fuzz installs it)")
    endif()
    set(_snug_fuzz_flags -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
                         -fno-omit-frame-pointer -Wno-pass-failed)
    add_compile_options(${_snug_fuzz_flags})
    add_link_options(-fsanitize=address,undefined)
endif()
