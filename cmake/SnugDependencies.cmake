# Third-party libraries: OpenMP, OpenBLAS (its OpenMP build, so that BLAS and snug share one thread runtime),
# libpng, libjpeg, libinih and libm. cmocka is looked up by SnugTests.cmake, only when tests are built.

find_package(OpenMP REQUIRED COMPONENTS C)
find_package(PkgConfig REQUIRED)

# Debian's libopenblas-openmp-dev installs openblas.pc under .../openblas-openmp/; other distributions put it in
# the default pkg-config path. Search the OpenMP variant first so that a pthread OpenBLAS is not picked up when
# both are installed.
foreach(_snug_dir IN ITEMS
        "/usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp/pkgconfig"
        "/usr/lib/openblas-openmp/pkgconfig")
    if(IS_DIRECTORY "${_snug_dir}")
        set(ENV{PKG_CONFIG_PATH} "${_snug_dir}:$ENV{PKG_CONFIG_PATH}")
    endif()
endforeach()
pkg_check_modules(OPENBLAS IMPORTED_TARGET openblas)
if(NOT OPENBLAS_FOUND)
    message(FATAL_ERROR
        "OpenBLAS not found through pkg-config (module 'openblas').\n"
        "HINT: run `make deps` (Debian/Ubuntu: apt-get install libopenblas-openmp-dev), or set PKG_CONFIG_PATH "
        "to the folder that holds openblas.pc.")
endif()

# libpng: src/data/segmentation_png.c decodes image and mask PNGs on demand.
pkg_check_modules(LIBPNG IMPORTED_TARGET libpng)
if(NOT LIBPNG_FOUND)
    message(FATAL_ERROR
        "libpng not found through pkg-config (module 'libpng').\n"
        "HINT: run `make deps` (Debian/Ubuntu: apt-get install libpng-dev), or set PKG_CONFIG_PATH to the folder "
        "that holds libpng.pc.")
endif()

# libjpeg (libjpeg-turbo's libjpeg API): src/data/jpeg_read.c decodes the JPEG files of image folders.
pkg_check_modules(LIBJPEG IMPORTED_TARGET libjpeg)
if(NOT LIBJPEG_FOUND)
    message(FATAL_ERROR
        "libjpeg not found through pkg-config (module 'libjpeg').\n"
        "HINT: run `make deps` (Debian/Ubuntu: apt-get install libjpeg62-turbo-dev), or set PKG_CONFIG_PATH to "
        "the folder that holds libjpeg.pc.")
endif()

# libinih: src/graph/model_file.c parses model files (models/*.ini and the user's) with it.
pkg_check_modules(INIH IMPORTED_TARGET inih)
if(NOT INIH_FOUND)
    message(FATAL_ERROR
        "libinih not found through pkg-config (module 'inih'); snug reads its model files with it.\n"
        "HINT: run `make deps` (Debian/Ubuntu: apt-get install libinih-dev), or set PKG_CONFIG_PATH to the folder "
        "that holds inih.pc.")
endif()

# Installed binaries keep the non-system library folders they were linked against (Debian's
# .../openblas-openmp/) in their RPATH, so they load the OpenMP OpenBLAS even when the system-wide
# libopenblas.so.0 alternative points to another variant: BLAS and snug must share one OpenMP runtime.
# (Set here because it must precede the creation of the targets.)
set(CMAKE_INSTALL_RPATH_USE_LINK_PATH ON)

find_library(SNUG_LIBM m)
if(SNUG_LIBM)
    set(SNUG_LIBM_LINK m)
else()
    set(SNUG_LIBM_LINK "")  # some toolchains fold libm into libc
endif()

# MPI (optional): data parallelism over ranks (`mpirun -np R snug train`). Found: src/dist/dist_mpi.c is built
# and the library links MPI; not found, or -DSNUG_WITH_MPI=OFF: src/dist/dist_none.c, where every process is a
# job of one rank. Debian: apt-get install libopenmpi-dev openmpi-bin (`make deps` does).
find_package(MPI COMPONENTS C QUIET)
if(MPI_C_FOUND)
    set(_snug_mpi_default ON)
else()
    set(_snug_mpi_default OFF)
endif()
option(SNUG_WITH_MPI "Data parallelism over MPI (default: ON when MPI is found)" ${_snug_mpi_default})
if(SNUG_WITH_MPI AND NOT MPI_C_FOUND)
    message(FATAL_ERROR
        "SNUG_WITH_MPI=ON but no MPI was found for C.\n"
        "HINT: run `make deps` (Debian/Ubuntu: apt-get install libopenmpi-dev openmpi-bin), or configure with "
        "-DSNUG_WITH_MPI=OFF.")
endif()
if(SNUG_WITH_MPI)
    message(STATUS "snug: MPI ${MPI_C_VERSION} found: data parallelism on (mpiexec: ${MPIEXEC_EXECUTABLE})")
else()
    message(STATUS "snug: built without MPI: every run is a single process (install libopenmpi-dev for mpirun)")
endif()

# protobuf-c and ONNX's schema: src/graph/onnx_load.c reads ONNX files (`--model FILE.onnx`) through the parser
# protoc-c generates from libonnx-dev's onnx.proto at build time (cmake/SnugOnnx.cmake); snug decodes no protobuf
# by hand. onnx.proto is proto2, which protoc-c 1.4 takes as it is.
pkg_check_modules(PROTOBUF_C IMPORTED_TARGET libprotobuf-c)
find_program(SNUG_PROTOC_C protoc-c)
find_file(SNUG_ONNX_PROTO onnx.proto PATHS /usr/include/onnx /usr/local/include/onnx NO_DEFAULT_PATH)
if(NOT PROTOBUF_C_FOUND OR NOT SNUG_PROTOC_C OR NOT SNUG_ONNX_PROTO)
    message(FATAL_ERROR
        "protobuf-c (pkg-config module 'libprotobuf-c': ${PROTOBUF_C_FOUND}), its compiler protoc-c "
        "(${SNUG_PROTOC_C}) or ONNX's onnx.proto (${SNUG_ONNX_PROTO}) not found; snug reads ONNX models with them.\n"
        "HINT: run `make deps` (Debian/Ubuntu: apt-get install libprotobuf-c-dev protobuf-c-compiler libonnx-dev), "
        "or pass -DSNUG_PROTOC_C=/path/to/protoc-c -DSNUG_ONNX_PROTO=/path/to/onnx.proto.")
endif()
