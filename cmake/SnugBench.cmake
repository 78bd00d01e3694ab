# Benchmarks: every bench/bench_*.c is an executable linked with the static library, and bench/harness/*.c is the
# benchmark program snug-bench (the five workloads per variant, paired, taking turns with PyTorch's process:
# bench/compare.py runs it). They are built with the project into ${build}/bench/ but never installed nor run by
# the tests as measurements: speed and memory figures come from `make bench`, on a quiet machine.

file(GLOB _snug_bench_sources CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/bench/bench_*.c")
foreach(_src IN LISTS _snug_bench_sources)
    get_filename_component(_name "${_src}" NAME_WE)
    add_executable(${_name} "${_src}")
    target_link_libraries(${_name} PRIVATE snug_static)
    # bench_products times an internal kernel (src/kernels/sgemm.h); the others use the public API only
    target_include_directories(${_name} PRIVATE "${PROJECT_SOURCE_DIR}/src")
    set_target_properties(${_name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${PROJECT_BINARY_DIR}/bench")
endforeach()

# snug-bench compiles in the few helpers it shares with the `snug` command rather than a copy of them: the
# flag-table parser, the error printers (their messages start with CLI_PROGRAM) and the process-start checks of
# OpenBLAS's kernel and SNUG_GEMM. Beside the public API it reads internal headers (core/error.h, core/rng.h,
# graph/model_file.h for the built-in model texts, kernels/sgemm.h for the SGEMM probe).
file(GLOB _snug_bench_harness CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/bench/harness/*.c")
if(_snug_bench_harness)
    add_executable(snug-bench ${_snug_bench_harness}
        "${PROJECT_SOURCE_DIR}/src/cli/flags.c"
        "${PROJECT_SOURCE_DIR}/src/cli/errors.c"
        "${PROJECT_SOURCE_DIR}/src/cli/process_start.c")
    target_compile_definitions(snug-bench PRIVATE CLI_PROGRAM="snug-bench")
    target_include_directories(snug-bench PRIVATE "${PROJECT_SOURCE_DIR}/src")
    target_link_libraries(snug-bench PRIVATE snug_static)
    set_target_properties(snug-bench PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${PROJECT_BINARY_DIR}/bench")
endif()

# bench_plan_time names the machine in its report as snug-bench does (bench/harness/machine.c)
if(TARGET bench_plan_time)
    target_sources(bench_plan_time PRIVATE "${PROJECT_SOURCE_DIR}/bench/harness/machine.c")
    target_include_directories(bench_plan_time PRIVATE "${PROJECT_SOURCE_DIR}/bench/harness")
endif()
