# SPDX-License-Identifier: Apache-2.0
# `sinkscope --help` and `--version` without a display (issue 31, finding 12): both exit 0 and
# print what QCommandLineParser prints; a plain start says what to set and exits 2 instead of
# aborting in Qt's platform plugin. Run as
#   cmake -DSINKSCOPE=<path to sinkscope> -P cli_without_display.cmake
# The display variables are removed from the child's environment, whatever the caller has.
if(NOT SINKSCOPE)
  message(FATAL_ERROR "pass -DSINKSCOPE=<path to the sinkscope executable>")
endif()
set(no_display ${CMAKE_COMMAND} -E env --unset=DISPLAY --unset=WAYLAND_DISPLAY
    --unset=QT_QPA_PLATFORM)

# check(<name> <expected exit code> <regex the output must match> <args...>)
function(check name want_rc want_regex)
  execute_process(COMMAND ${no_display} ${SINKSCOPE} ${ARGN}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 30)
  if(NOT rc STREQUAL "${want_rc}")
    message(FATAL_ERROR "${name}: exit status ${rc}, expected ${want_rc}\nstdout:\n${out}\nstderr:\n${err}")
  endif()
  if(NOT "${out}${err}" MATCHES "${want_regex}")
    message(FATAL_ERROR "${name}: output does not match '${want_regex}'\nstdout:\n${out}\nstderr:\n${err}")
  endif()
  if("${out}${err}" MATCHES "platform plugin|Aborted|could not connect")
    message(FATAL_ERROR "${name}: Qt's platform error was printed\n${out}${err}")
  endif()
  message(STATUS "${name}: exit ${rc}, output as expected")
endfunction()

check("--help" 0 "Usage: [^\n]*sinkscope \\[options\\].*-v, --version.*--prompt-file <FILE>.*--fresh" --help)
check("-h" 0 "Usage: [^\n]*sinkscope \\[options\\]" -h)
check("--version" 0 "^sinkscope 0\\.[0-9]+" --version)
check("--version with other options" 0 "^sinkscope 0\\.[0-9]+" --fresh --backend cpu --version)
check("plain start" 2 "sinkscope: no display: set DISPLAY or QT_QPA_PLATFORM=offscreen" --fresh)
check("--help lists the GPU options" 0 "--gpu-weights <MODE>.*--gpu-activations <PREC>" --help)

# Bad values of the GPU options: exit 2 naming the option and the value (with the offscreen
# platform: the values are checked after the display test).
function(check_offscreen name want_rc want_regex)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env QT_QPA_PLATFORM=offscreen ${SINKSCOPE} ${ARGN}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 30)
  if(NOT rc STREQUAL "${want_rc}" OR NOT "${out}${err}" MATCHES "${want_regex}")
    message(FATAL_ERROR "${name}: exit status ${rc} (expected ${want_rc}), output:\n${out}${err}")
  endif()
  message(STATUS "${name}: exit ${rc}, output as expected")
endfunction()
check_offscreen("--gpu-weights fp8" 2 "--gpu-weights must be auto, bf16 or native, got 'fp8'" --fresh --gpu-weights fp8)
check_offscreen("--gpu-activations int4" 2 "--gpu-activations must be int16 or int8, got 'int4'" --fresh --gpu-activations int4)
message(STATUS "cli_without_display: all checks passed")
