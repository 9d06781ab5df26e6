# SPDX-License-Identifier: Apache-2.0
# `cpack -G DEB` in the build folder makes sinkscope_<version>_<arch>.deb with both
# programs, the desktop entry and the icon; its dependencies come from dpkg-shlibdeps (libraries
# outside Debian's packages, such as the CUDA toolkit's, are left to the user).
set(CPACK_GENERATOR "DEB")
set(CPACK_PACKAGE_NAME "sinkscope")
set(CPACK_PACKAGE_VENDOR "SinkScope developers")
set(CPACK_PACKAGE_CONTACT "SinkScope developers <sinkscope@users.noreply.github.com>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Workbench for attention sinks, KV-cache policies and dynamic block-sparse attention")
set(CPACK_DEBIAN_PACKAGE_SECTION "science")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
if(SINKSCOPE_CUDA)
  # dpkg-shlibdeps must find the CUDA toolkit's libraries (no Debian package names them).
  set(_sinkscope_deb_dirs "${CUDAToolkit_LIBRARY_DIR}")
  if(TARGET CUDA::cupti)
    get_target_property(_cupti CUDA::cupti IMPORTED_LOCATION)
    if(_cupti)
      get_filename_component(_cupti_dir "${_cupti}" DIRECTORY)
      list(APPEND _sinkscope_deb_dirs "${_cupti_dir}")
    endif()
  endif()
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS "${_sinkscope_deb_dirs}")
endif()
set(CPACK_PACKAGE_INSTALL_DIRECTORY "sinkscope")
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
include(CPack)
