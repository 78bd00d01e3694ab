# Benchmarks: every bench/bench_*.c is an executable linked with the static library. They are built with the
# project but never run by the tests: speed and memory figures come from `make bench`, on a quiet machine.

file(GLOB _snug_bench_sources CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/bench/bench_*.c")
foreach(_src IN LISTS _snug_bench_sources)
    get_filename_component(_name "${_src}" NAME_WE)
    add_executable(${_name} "${_src}")
    target_link_libraries(${_name} PRIVATE snug_static)
    # bench_products times an internal kernel (src/ops/sgemm.h); the others use the public API only
    target_include_directories(${_name} PRIVATE "${PROJECT_SOURCE_DIR}/src")
    set_target_properties(${_name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${PROJECT_BINARY_DIR}/bench")
endforeach()
