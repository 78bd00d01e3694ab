# Install: libsnug.a and libsnug.so* to lib/, snug.h to include/, the `snug` command to bin/, the model zoo's
# files (models/*.ini, to copy and edit) to share/snug/models/, and snug.pc to lib/pkgconfig/. snug.pc locates itself (prefix=${pcfiledir}/../..), so it stays right under any --prefix or
# DESTDIR, including `cmake --install --prefix` that differs from the prefix given at configure time.

set(SNUG_INSTALL_LIBDIR lib)
set(SNUG_INSTALL_INCLUDEDIR include)
set(SNUG_INSTALL_BINDIR bin)
set(SNUG_INSTALL_MODELSDIR share/snug/models)

install(TARGETS snug_static snug_shared
    ARCHIVE DESTINATION ${SNUG_INSTALL_LIBDIR}
    LIBRARY DESTINATION ${SNUG_INSTALL_LIBDIR}
    RUNTIME DESTINATION ${SNUG_INSTALL_BINDIR})
install(FILES "${PROJECT_SOURCE_DIR}/include/snug.h" DESTINATION ${SNUG_INSTALL_INCLUDEDIR})
install(DIRECTORY "${PROJECT_SOURCE_DIR}/models/" DESTINATION ${SNUG_INSTALL_MODELSDIR} FILES_MATCHING PATTERN "*.ini")
if(TARGET snug)
    install(TARGETS snug RUNTIME DESTINATION ${SNUG_INSTALL_BINDIR})
endif()

# A static link of libsnug.a needs MPI's libraries too when the library was built with it.
set(SNUG_PC_MPI_LIBS "")
if(SNUG_WITH_MPI)
    list(JOIN MPI_C_LIBRARIES " " SNUG_PC_MPI_LIBS)
endif()
configure_file("${PROJECT_SOURCE_DIR}/snug.pc.in" "${PROJECT_BINARY_DIR}/snug.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/snug.pc" DESTINATION ${SNUG_INSTALL_LIBDIR}/pkgconfig)
