# pinloader.pc from cmake/pinloader.pc.in (included by CMakeLists.txt).
#
# Libs.private lists what a static link needs besides libpinloader.a: the
# image codecs installed next to it (${libdir}/pinloader/), threads, libm
# and, only when the CUDA backend is built in, the static CUDA runtime. The
# runtime is named as -L${cudalibdir} -lcudart_static, with cudalibdir the
# directory CMake found it in: a machine whose toolkit is elsewhere says so
# with `pkg-config --define-variable=cudalibdir=DIR`, and a build without
# CUDA mentions no CUDA at all.
set(PL_PC_LIBS_PRIVATE "-lpthread -lm")
foreach(a ${PL_CODEC_ARCHIVES}) # the static library's image codecs
  get_filename_component(name ${a} NAME)
  set(PL_PC_LIBS_PRIVATE "\${libdir}/pinloader/${name} ${PL_PC_LIBS_PRIVATE}")
endforeach()
set(PL_PC_VARIABLES "")
if(PL_HAVE_CUDA)
  if(CUDA_cudart_static_LIBRARY)
    get_filename_component(PL_PC_CUDA_LIBDIR "${CUDA_cudart_static_LIBRARY}" DIRECTORY)
  else()
    set(PL_PC_CUDA_LIBDIR "${CUDAToolkit_LIBRARY_DIR}")
  endif()
  set(PL_PC_VARIABLES "cudalibdir=${PL_PC_CUDA_LIBDIR}\n")
  set(PL_PC_LIBS_PRIVATE
      "-L\${cudalibdir} -lcudart_static -ldl -lrt ${PL_PC_LIBS_PRIVATE}")
endif()
# The prefix is found from the .pc file's place, so that `cmake --install
# --prefix DIR` (a prefix chosen after configuring) gives a working file.
file(RELATIVE_PATH PL_PC_UP /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
string(REGEX REPLACE "/$" "" PL_PC_UP "${PL_PC_UP}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/pinloader.pc.in
  ${CMAKE_BINARY_DIR}/pinloader.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/pinloader.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
