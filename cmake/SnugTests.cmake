# Tests: every tests/test_*.c is one executable and one CTest test of the same name. Other tests/*.c files
# (shared helpers) form a small library that every test links. tests/cli/test_*.sh are the CLI tests (below).

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
list(FILTER SNUG_TEST_HELPER_SOURCES EXCLUDE REGEX "/isa_cap\\.c$")

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
    add_executable(${_snug_name} "${_snug_src}" "${PROJECT_SOURCE_DIR}/tests/isa_cap.c")
    target_link_libraries(${_snug_name} PRIVATE snug_test_support)
    set_target_properties(${_snug_name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${PROJECT_BINARY_DIR}/tests")
    add_test(NAME ${_snug_name} COMMAND ${_snug_name})
    set_tests_properties(${_snug_name} PROPERTIES ENVIRONMENT "${SNUG_TEST_ENVIRONMENT}" TIMEOUT ${SNUG_TEST_TIMEOUT})
endforeach()

# The promises whose kernels depend on the CPU, run again as on smaller CPUs (tests/isa_cap.c): NAME_avx2 as on
# an AVX2-only CPU (snug's AVX-512 kernels off, OpenBLAS's Haswell kernel), NAME_portable as on one with neither.
# On such a CPU they repeat the plain test; on an AVX-512 one they are what keeps the other paths honest.
set(SNUG_ISA_TESTS test_plan test_memory_budget test_reference_models test_op_gradients test_op_gradients_2
    test_ops_zoo_a test_ops_zoo_b test_linear_direct test_trainer test_small_gemm test_bgemm test_conv3x3_bf16
    test_conv_geometry test_conv_bgemm test_op_binary test_ops_layout test_rounds_output test_attention_bgemm
    test_bf16)
# The two long ones (minutes each) only in the optimised build: under the sanitizers they would triple the
# longest tests for no path the optimised run does not already take.
if(NOT SNUG_SANITIZE)
    list(APPEND SNUG_ISA_TESTS test_precision test_accumulation)
endif()
foreach(_snug_name IN LISTS SNUG_ISA_TESTS)
    if(NOT TARGET ${_snug_name})
        continue()
    endif()
    foreach(_snug_isa IN ITEMS avx2 portable)
        set(_snug_core Haswell)
        if(_snug_isa STREQUAL "portable")
            set(_snug_core Prescott)
        endif()
        set(_snug_env "${SNUG_TEST_ENVIRONMENT};SNUG_TEST_ISA=${_snug_isa};OPENBLAS_CORETYPE=${_snug_core}")
        if(_snug_name STREQUAL "test_precision")
            # the zoo's layers at the sizes that take seconds: resnet50 and unet-hires repeat them, minutes longer
            list(APPEND _snug_env "SNUG_TEST_MODELS=mlp,cnn,resmlp,resnet20,resnet20-gn,unet,gpt,vgg16")
        endif()
        add_test(NAME ${_snug_name}_${_snug_isa} COMMAND ${_snug_name})
        set_tests_properties(${_snug_name}_${_snug_isa} PROPERTIES ENVIRONMENT "${_snug_env}" TIMEOUT ${SNUG_TEST_TIMEOUT})
    endforeach()
endforeach()

# Winograd's weight gradient on bf16 pairs once more as on an AVX-512 CPU without AVX512_BF16: its AVX-512
# transforms with the products' portable twin (the avx2 and portable caps have no Winograd to run).
if(TARGET test_conv3x3_winograd_dw_bf16)
    add_test(NAME test_conv3x3_winograd_dw_bf16_avx512 COMMAND test_conv3x3_winograd_dw_bf16)
    set_tests_properties(test_conv3x3_winograd_dw_bf16_avx512 PROPERTIES
        ENVIRONMENT "${SNUG_TEST_ENVIRONMENT};SNUG_TEST_ISA=avx512" TIMEOUT ${SNUG_TEST_TIMEOUT})
endif()

# conv3x3_bf16 once more as on an AVX512_BF16 CPU without AMX tiles: on an AMX host the vdpbf16ps kernel, bit
# for bit against its portable twin (the host's own run takes the tiles, whose chains differ from the twin's).
# The optimised build only: under the sanitizers the portable twin's reference runs take minutes.
if(TARGET test_conv3x3_bf16 AND NOT SNUG_SANITIZE)
    add_test(NAME test_conv3x3_bf16_avx512_bf16 COMMAND test_conv3x3_bf16)
    set_tests_properties(test_conv3x3_bf16_avx512_bf16 PROPERTIES
        ENVIRONMENT "${SNUG_TEST_ENVIRONMENT};SNUG_TEST_ISA=avx512_bf16" TIMEOUT ${SNUG_TEST_TIMEOUT})
endif()

# bf16 plans whose products stay float32 on the rounded values (sgemm: an AVX-512 CPU where bf16 products do not
# pay, as an Intel one without AMX), once more where the host's own plans take bgemm (AMD, AMX): a few models, in
# the optimised build only, as the other test_precision twins.
if(TARGET test_precision AND NOT SNUG_SANITIZE)
    add_test(NAME test_precision_avx512 COMMAND test_precision)
    set_tests_properties(test_precision_avx512 PROPERTIES ENVIRONMENT
        "${SNUG_TEST_ENVIRONMENT};SNUG_TEST_ISA=avx512;SNUG_TEST_MODELS=mlp,cnn,resnet20-gn,gpt"
        TIMEOUT ${SNUG_TEST_TIMEOUT})
endif()

# tests/cli/test_*.sh, when present, are the end-to-end tests of the command: test_cli.sh is the test `cli`,
# test_NAME.sh the test `cli_NAME`; each gets the built `snug` binary and the MNIST folder as arguments.
# (The glob is a configure dependency, so a script that appears or disappears re-runs the configure step.)
file(GLOB _snug_cli_tests CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/tests/cli/test_*.sh")
# Under ASan, Open MPI's runtime keeps allocations until exit that LeakSanitizer reports; tests/lsan-mpi.supp
# suppresses frames inside Open MPI only, and the slow unwinder is needed to see those frames at all.
set(SNUG_MPI_TEST_ENVIRONMENT "")
if(SNUG_SANITIZE)
    set(SNUG_MPI_TEST_ENVIRONMENT
        "ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0"
        "LSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/tests/lsan-mpi.supp:print_suppressions=0")
endif()
if(_snug_cli_tests)
    if(TARGET snug)
        find_program(SNUG_BASH bash REQUIRED)
        foreach(_snug_script IN LISTS _snug_cli_tests)
            get_filename_component(_snug_name "${_snug_script}" NAME_WE)
            string(REGEX REPLACE "^test_" "" _snug_name "${_snug_name}")
            if(NOT _snug_name STREQUAL "cli")
                set(_snug_name "cli_${_snug_name}")
            endif()
            set(_snug_env ${SNUG_TEST_ENVIRONMENT})
            # test_mpi.sh launches ranks with mpiexec: only in a build with MPI, told where mpiexec is.
            if(_snug_name STREQUAL "cli_mpi")
                if(NOT SNUG_WITH_MPI)
                    continue()
                endif()
                list(APPEND _snug_env "SNUG_MPIEXEC=${MPIEXEC_EXECUTABLE}" ${SNUG_MPI_TEST_ENVIRONMENT})
            endif()
            add_test(NAME ${_snug_name} COMMAND "${SNUG_BASH}" "${_snug_script}" $<TARGET_FILE:snug> "${SNUG_DATA_DIR}")
            set_tests_properties(${_snug_name} PROPERTIES ENVIRONMENT "${_snug_env}" TIMEOUT ${SNUG_TEST_TIMEOUT})
        endforeach()
    else()
        message(WARNING "tests/cli/ has test scripts but the `snug` command is not built (no src/cli/*.c): skipped")
    endif()
endif()

# The dependency rule of the tree (docs/architecture.md): rooms depend downwards, no include cycle in a room, no
# getenv or flag name below src/cli/, a thin src/cli/.
find_program(SNUG_PYTHON3 python3)
if(SNUG_PYTHON3)
    add_test(NAME architecture COMMAND "${SNUG_PYTHON3}" "${PROJECT_SOURCE_DIR}/tests/architecture.py"
             "${PROJECT_SOURCE_DIR}")
endif()

# torchvision's resnet18 against PyTorch (docs/onnx.md): the fixture exports it with Debian's python3-torch and
# python3-torchvision (make deps installs them) into the build tree with PyTorch's float64 reference of one
# step; test_onnx_torch compares snug's gradients with it and cli_onnx_torch trains it and loads the weights back
# into torchvision's module. Debian's interpreter first: its modules are not those of a python3 earlier on PATH.
find_program(SNUG_SYSTEM_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT SNUG_SYSTEM_PYTHON3)
    set(SNUG_SYSTEM_PYTHON3 "${SNUG_PYTHON3}")
endif()
set(SNUG_ONNX_TORCH_DIR "${PROJECT_BINARY_DIR}/onnx")
# snug_torch_fixture(FIXTURE FLAG TESTS...): the test FIXTURE_export runs `scripts/export_onnx.py FLAG` into the
# build tree; TESTS require it and are told where it wrote and which python3 made it. Each test_* of TESTS also
# runs as on AVX2-only and portable CPUs: which side of a ReLU's tie float32 rounding lands on depends on the
# kernels, so the reference's batch must hold on every path (scripts/resnet18_reference.py).
function(snug_torch_fixture fixture flag)
    add_test(NAME ${fixture}_export COMMAND "${SNUG_SYSTEM_PYTHON3}" "${PROJECT_SOURCE_DIR}/scripts/export_onnx.py"
             ${flag} "${SNUG_ONNX_TORCH_DIR}")
    set_tests_properties(${fixture}_export PROPERTIES FIXTURES_SETUP ${fixture} TIMEOUT ${SNUG_TEST_TIMEOUT}
                         ENVIRONMENT "OMP_NUM_THREADS=2")
    set(_dir "SNUG_ONNX_TORCH_DIR=${SNUG_ONNX_TORCH_DIR}")
    foreach(_name IN LISTS ARGN)
        if(TEST ${_name})
            set_tests_properties(${_name} PROPERTIES FIXTURES_REQUIRED ${fixture} ENVIRONMENT
                                 "${SNUG_TEST_ENVIRONMENT};${_dir};SNUG_PYTHON3=${SNUG_SYSTEM_PYTHON3}")
        endif()
        if(TARGET ${_name})
            foreach(_isa IN ITEMS avx2 portable)
                set(_core Haswell)
                if(_isa STREQUAL "portable")
                    set(_core Prescott)
                endif()
                add_test(NAME ${_name}_${_isa} COMMAND ${_name})
                set_tests_properties(${_name}_${_isa} PROPERTIES FIXTURES_REQUIRED ${fixture}
                                     TIMEOUT ${SNUG_TEST_TIMEOUT} ENVIRONMENT
                                     "${SNUG_TEST_ENVIRONMENT};SNUG_TEST_ISA=${_isa};OPENBLAS_CORETYPE=${_core};${_dir}")
            endforeach()
        endif()
    endforeach()
endfunction()
snug_torch_fixture(onnx_torch --resnet18 test_onnx_torch cli_onnx_torch)
# The zoo's unet as a PyTorch module (scripts/unet_reference.py), exported by PyTorch at the zoo's 1x256x256 and
# at 1x32x32 with PyTorch's float64 reference of one step: cli_onnx_unet plans the first against the zoo's unet
# and trains it, test_onnx_unet compares snug's gradients on the second with the reference.
snug_torch_fixture(onnx_unet --unet test_onnx_unet cli_onnx_unet)
# The zoo's resnet20 as a PyTorch module (scripts/resnet20_reference.py), exported at the zoo's 1x32x32 with
# PyTorch's float64 reference of one step: cli_onnx_resnet20 plans it against the zoo's resnet20 and trains it
# back into the module, test_onnx_resnet20 compares snug's gradients with the reference.
snug_torch_fixture(onnx_resnet20 --resnet20 test_onnx_resnet20 cli_onnx_resnet20)

# The zoo's gpt as a PyTorch module (scripts/gpt_twin.py), exported at opsets 13 and 17 into the build tree with
# PyTorch's float64 reference of one step: cli_onnx_gpt plans both against the zoo's gpt and trains one back into
# the module, test_onnx_gpt compares snug's gradients on both with the reference (docs/onnx.md).
snug_torch_fixture(onnx_gpt --gpt test_onnx_gpt cli_onnx_gpt)
# Attention two ways (scripts/attention_twin.py): an encoder block fused into a non-causal self_attention and a
# block written by hand, mapped onto the layout layers, exported with PyTorch's float64 reference of one step:
# test_onnx_attention compares snug's gradients with it, cli_onnx_attention trains it back into the module.
snug_torch_fixture(onnx_attention --attention test_onnx_attention cli_onnx_attention)

# Broadcasting arithmetic as PyTorch writes it (scripts/se_reference.py: a constant per-channel normalisation,
# SiLU, squeeze-excitation, a residual Sub and Div), exported with PyTorch's float64 reference of one step:
# test_onnx_se compares snug's gradients with it, cli_onnx_se trains it and loads the weights back into the module.
snug_torch_fixture(onnx_se --se test_onnx_se cli_onnx_se)
# Dilated convolutions as PyTorch writes them (scripts/atrous_reference.py: DeepLab's atrous 3x3s, a strided
# dilated one, groups, an even kernel), exported with PyTorch's float64 reference of one step: test_onnx_atrous
# compares snug's gradients with it, cli_onnx_atrous trains it and loads the weights back into the module.
snug_torch_fixture(onnx_atrous --atrous test_onnx_atrous cli_onnx_atrous)
