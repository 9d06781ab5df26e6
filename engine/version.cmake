# SPDX-License-Identifier: Apache-2.0
# Writes the provenance header at BUILD time (engine/CMakeLists.txt runs it before every build of
# the engine), so an incremental build after a commit or an edit never reports the sha of the
# commit it was configured at. configure_file only rewrites the header when its text changes, so
# an unchanged sha recompiles nothing. Inputs: SRC (source tree), IN, OUT, VERSION.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SRC}
  OUTPUT_VARIABLE SINKSCOPE_GIT_SHA OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT SINKSCOPE_GIT_SHA)
  set(SINKSCOPE_GIT_SHA unknown)
else()
  # Tracked files edited since that commit: the binary is not that commit's code.
  execute_process(COMMAND git status --porcelain --untracked-files=no WORKING_DIRECTORY ${SRC}
    OUTPUT_VARIABLE dirty OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(dirty)
    string(APPEND SINKSCOPE_GIT_SHA "-dirty")
  endif()
endif()
set(PROJECT_VERSION ${VERSION})
configure_file(${IN} ${OUT} @ONLY)
