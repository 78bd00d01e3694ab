# Third-party libraries: OpenMP, OpenBLAS (its OpenMP build, so that BLAS and snug share one thread runtime)
# and libm. cmocka is looked up by SnugTests.cmake, only when tests are built.

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
