# The snug library: every src/**/*.c except the CLI, compiled once (position independent) and packed both as
# libsnug.a (snug_static: the CLI and the tests link it) and libsnug.so.0 (snug_shared: for other programs).

file(GLOB_RECURSE SNUG_LIB_SOURCES CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/src/*.c")
list(FILTER SNUG_LIB_SOURCES EXCLUDE REGEX "^${PROJECT_SOURCE_DIR}/src/cli/")
# src/dist/ has two implementations of one interface: MPI's, or the job of one rank.
if(SNUG_WITH_MPI)
    list(FILTER SNUG_LIB_SOURCES EXCLUDE REGEX "/src/dist/dist_none\\.c$")
else()
    list(FILTER SNUG_LIB_SOURCES EXCLUDE REGEX "/src/dist/dist_mpi\\.c$")
endif()

# While src/ is still empty a library must still build: one generated translation unit stands in for it
# (ISO C forbids an empty one, hence the typedef).
if(NOT SNUG_LIB_SOURCES)
    set(_snug_placeholder "${PROJECT_BINARY_DIR}/generated/snug_placeholder.c")
    file(CONFIGURE OUTPUT "${_snug_placeholder}"
         CONTENT "/* generated: src/ has no library sources yet */\ntypedef int snug_placeholder_unit;\n")
    set(SNUG_LIB_SOURCES "${_snug_placeholder}")
endif()

# cJSON: src/io/safetensors_write.c and safetensors_read.c write and read the JSON header of safetensors files;
# src/io/run_log_read.c reads the lines of a run's JSON-lines log.
pkg_check_modules(CJSON IMPORTED_TARGET libcjson)
if(NOT CJSON_FOUND)
    message(FATAL_ERROR
        "cJSON not found through pkg-config (module 'libcjson'); snug writes and reads safetensors headers with it.\n"
        "HINT: run `make deps` (Debian/Ubuntu: apt-get install libcjson-dev).")
endif()

# Threads: src/dist/start_watch.c bounds the start-up of an MPI job with a thread of its own.
find_package(Threads REQUIRED)

add_library(snug_objects OBJECT ${SNUG_LIB_SOURCES})
set_target_properties(snug_objects PROPERTIES POSITION_INDEPENDENT_CODE ON)
target_include_directories(snug_objects
    PUBLIC  "${PROJECT_SOURCE_DIR}/include"
    PRIVATE "${PROJECT_SOURCE_DIR}/src")
target_link_libraries(snug_objects PRIVATE OpenMP::OpenMP_C PkgConfig::OPENBLAS PkgConfig::LIBPNG PkgConfig::LIBJPEG PkgConfig::INIH PkgConfig::CJSON Threads::Threads)
if(SNUG_WITH_MPI)
    target_link_libraries(snug_objects PRIVATE MPI::MPI_C)
    set(SNUG_MPI_LINK MPI::MPI_C)
else()
    set(SNUG_MPI_LINK "")
endif()

# The static library carries its dependencies as PUBLIC usage requirements: whoever links libsnug.a must link
# OpenBLAS, OpenMP, libpng, libjpeg, libinih, cJSON and libm too, and tests may call cblas_* or omp_* themselves.
add_library(snug_static STATIC $<TARGET_OBJECTS:snug_objects>)
target_include_directories(snug_static PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:include>)
target_link_libraries(snug_static PUBLIC OpenMP::OpenMP_C PkgConfig::OPENBLAS PkgConfig::LIBPNG PkgConfig::LIBJPEG PkgConfig::INIH PkgConfig::CJSON Threads::Threads ${SNUG_MPI_LINK} ${SNUG_LIBM_LINK})
set_target_properties(snug_static PROPERTIES OUTPUT_NAME snug)

add_library(snug_shared SHARED $<TARGET_OBJECTS:snug_objects>)
target_include_directories(snug_shared PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:include>)
target_link_libraries(snug_shared PRIVATE OpenMP::OpenMP_C PkgConfig::OPENBLAS PkgConfig::LIBPNG PkgConfig::LIBJPEG PkgConfig::INIH PkgConfig::CJSON Threads::Threads ${SNUG_MPI_LINK} ${SNUG_LIBM_LINK})
set_target_properties(snug_shared PROPERTIES
    OUTPUT_NAME snug
    VERSION ${PROJECT_VERSION}
    SOVERSION 0)
