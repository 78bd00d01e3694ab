# The ONNX parser: protoc-c turns onnx.proto (found by SnugDependencies.cmake, Debian's libonnx-dev) into
# ${PROJECT_BINARY_DIR}/generated/onnx/onnx.pb-c.[ch] at build time, compiled into the library; src/graph/onnx_load.c
# includes the header. The generated code is protoc-c's, so the project's warnings are not asked of it.

set(SNUG_ONNX_DIR "${PROJECT_BINARY_DIR}/generated/onnx")
get_filename_component(_snug_onnx_proto_dir "${SNUG_ONNX_PROTO}" DIRECTORY)
add_custom_command(
    OUTPUT "${SNUG_ONNX_DIR}/onnx.pb-c.c" "${SNUG_ONNX_DIR}/onnx.pb-c.h"
    COMMAND ${CMAKE_COMMAND} -E make_directory "${SNUG_ONNX_DIR}"
    COMMAND "${SNUG_PROTOC_C}" "--proto_path=${_snug_onnx_proto_dir}" "--c_out=${SNUG_ONNX_DIR}" "${SNUG_ONNX_PROTO}"
    DEPENDS "${SNUG_ONNX_PROTO}"
    COMMENT "protoc-c: the ONNX parser from ${SNUG_ONNX_PROTO}"
    VERBATIM)
set_source_files_properties("${SNUG_ONNX_DIR}/onnx.pb-c.c" PROPERTIES COMPILE_OPTIONS "-w")
target_sources(snug_objects PRIVATE "${SNUG_ONNX_DIR}/onnx.pb-c.c")
target_include_directories(snug_objects PRIVATE "${SNUG_ONNX_DIR}")
target_link_libraries(snug_objects PRIVATE PkgConfig::PROTOBUF_C)
target_link_libraries(snug_static PUBLIC PkgConfig::PROTOBUF_C)
target_link_libraries(snug_shared PRIVATE PkgConfig::PROTOBUF_C)
