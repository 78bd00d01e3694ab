# The Python package (python/, docs/python.md): its C extension snug._snug built here against the build tree's
# libsnug.so, beside a copy of the pure-Python files, in ${build}/python/ (what the tests import); `pip install
# ./python` builds the same sources against the installed library instead (python/setup.py). Built with the
# Debian python3 whose packages scripts/install-deps.sh installs (python3-dev, python3-numpy, python3-pytest):
# a python3 earlier on PATH (pyenv, a virtual environment) may have neither numpy nor pytest. Left out of
# sanitised builds: an instrumented module does not load into an uninstrumented interpreter.
if(SNUG_SANITIZE OR SNUG_FUZZ)
    return()
endif()
if(NOT DEFINED Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
    set(Python3_EXECUTABLE /usr/bin/python3)
endif()
find_package(Python3 COMPONENTS Interpreter Development.Module)
if(NOT Python3_Development.Module_FOUND)
    message(STATUS "Python headers not found: the Python package (python/) is not built; `make deps` installs them")
    return()
endif()

file(GLOB SNUG_PY_SOURCES CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/python/src/*.c")
file(GLOB SNUG_PY_FILES CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/python/snug/*.py" "${PROJECT_SOURCE_DIR}/python/snug/*.pyi")
set(SNUG_PY_DIR "${PROJECT_BINARY_DIR}/python")
Python3_add_library(snug_python MODULE WITH_SOABI ${SNUG_PY_SOURCES})
target_link_libraries(snug_python PRIVATE snug_shared)
target_compile_options(snug_python PRIVATE -Wno-pedantic -Wno-missing-field-initializers)
set_target_properties(snug_python PROPERTIES
    OUTPUT_NAME _snug
    LIBRARY_OUTPUT_DIRECTORY "${SNUG_PY_DIR}/snug"
    C_VISIBILITY_PRESET hidden)
# every build: an edited .py file is copied even when the extension itself is up to date
add_custom_target(snug_python_files ALL
    COMMAND ${CMAKE_COMMAND} -E make_directory "${SNUG_PY_DIR}/snug"
    COMMAND ${CMAKE_COMMAND} -E copy_if_different ${SNUG_PY_FILES} "${SNUG_PY_DIR}/snug/")

if(BUILD_TESTING)
    execute_process(COMMAND "${Python3_EXECUTABLE}" -c "import numpy, pytest"
                    RESULT_VARIABLE _snug_py_missing OUTPUT_QUIET ERROR_QUIET)
    if(_snug_py_missing)
        message(STATUS "${Python3_EXECUTABLE} lacks numpy or pytest: the Python tests are not added (`make deps`)")
    else()
        add_test(NAME python COMMAND "${Python3_EXECUTABLE}" -m pytest -q -p no:cacheprovider
                 "${PROJECT_SOURCE_DIR}/python/tests")
        set_tests_properties(python PROPERTIES TIMEOUT ${SNUG_TEST_TIMEOUT} ENVIRONMENT
            "${SNUG_TEST_ENVIRONMENT};PYTHONPATH=${SNUG_PY_DIR};SNUG_CLI=$<TARGET_FILE:snug>;PYTHONDONTWRITEBYTECODE=1")
    endif()
endif()
