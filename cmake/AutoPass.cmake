# AutoPass.cmake -- build a CMake project through autopass without editing it.
#
# Without touching the project (CMake >= 3.24):
#   cmake -S . -B build -G Ninja \
#         -DCMAKE_PROJECT_TOP_LEVEL_INCLUDES=/path/to/autopass/cmake/AutoPass.cmake
#   cmake --build build
#   autopass units          # run from the source folder (the store is ./.autopass)
#
# Or from a CMakeLists.txt, before the targets are defined:
#   list(APPEND CMAKE_MODULE_PATH /path/to/autopass/cmake)
#   include(AutoPass)
#
# Tuned release builds (apply the flags database):
#   cmake -S . -B build -G Ninja -DAUTOPASS_MODE=apply \
#         -DCMAKE_PROJECT_TOP_LEVEL_INCLUDES=/path/to/autopass/cmake/AutoPass.cmake
#
# Cache options:
#   AUTOPASS_MODE   record (default) | apply | off
#   AUTOPASS_FLAGS_DB  apply: the flags database (default: <root>/autopass.flags.json)
#   AUTOPASS_APPLY_POLICY  apply: warn (default) | error | apply-anyway
#   AUTOPASS_STORE  the store folder (default: <top source dir>/.autopass)
#   AUTOPASS_ROOT   the project root sources are recorded relative to (default: top source dir)
#   AUTOPASS_ONE_PASS  record: each compile's front end runs once, a pass plugin saving
#                   its IR (default ON; OFF: a second front-end pass makes the IR)
#   AUTOPASS_LAUNCHER  the compiler launcher (default: autopass's native launcher, which
#                   serves compiles from a server it starts on demand; else autopass-cc)
#
# Included before languages are enabled (the first form), it also picks clang-19 /
# clang++-19 as the compilers when none were chosen: autopass captures LLVM IR, which
# needs clang. Compiles run through CMAKE_<LANG>_COMPILER_LAUNCHER, links through
# CMAKE_<LANG>_LINKER_LAUNCHER, so the project's own settings stay as they are.

include_guard(GLOBAL)

set(AUTOPASS_MODE "record" CACHE STRING "autopass wrapper mode: record, apply or off")
set_property(CACHE AUTOPASS_MODE PROPERTY STRINGS record apply off)
if(NOT AUTOPASS_MODE MATCHES "^(record|apply|off)$")
  message(FATAL_ERROR "AutoPass: AUTOPASS_MODE is \"${AUTOPASS_MODE}\", not one of record, "
                      "apply, off: configure again with -DAUTOPASS_MODE=record (or apply, off).")
endif()
set(AUTOPASS_ROOT "${CMAKE_SOURCE_DIR}" CACHE PATH "project root for autopass")
set(AUTOPASS_STORE "${AUTOPASS_ROOT}/.autopass" CACHE PATH "autopass store folder")
set(AUTOPASS_FLAGS_DB "${AUTOPASS_ROOT}/autopass.flags.json" CACHE FILEPATH
    "autopass flags database (apply mode)")
set(AUTOPASS_APPLY_POLICY "warn" CACHE STRING "apply mode: warn, error or apply-anyway")
option(AUTOPASS_ONE_PASS "record mode: run the front end once per compile (an IR-saving plugin)" ON)

find_program(AUTOPASS_CC_WRAPPER NAMES autopass-cc
             HINTS ENV VIRTUAL_ENV PATH_SUFFIXES bin
             DOC "autopass compiler wrapper")
if(NOT AUTOPASS_CC_WRAPPER)
  message(FATAL_ERROR "AutoPass: autopass-cc not found on PATH. Install autopass "
                      "(pip install autopass, or activate its virtual environment), or set "
                      "-DAUTOPASS_CC_WRAPPER=/path/to/autopass-cc.")
endif()

# The native launcher, written into the build folder (it goes with it), runs each compile
# through a server it starts on demand: no Python start per compile.  Where it cannot be
# had, the Python wrapper found above is the launcher, as before.
if(NOT DEFINED CACHE{AUTOPASS_LAUNCHER} OR NOT EXISTS "${AUTOPASS_LAUNCHER}")
  unset(AUTOPASS_LAUNCHER CACHE)
  execute_process(COMMAND "${AUTOPASS_CC_WRAPPER}" --autopass-launcher
                          "${CMAKE_BINARY_DIR}/autopass-launcher"
                  OUTPUT_VARIABLE _autopass_native RESULT_VARIABLE _autopass_native_status
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(_autopass_native_status EQUAL 0 AND EXISTS "${_autopass_native}")
    set(AUTOPASS_LAUNCHER "${_autopass_native}" CACHE FILEPATH
        "autopass's compiler launcher (the native one when it could be built)")
  else()
    set(AUTOPASS_LAUNCHER "${AUTOPASS_CC_WRAPPER}" CACHE FILEPATH
        "autopass's compiler launcher (the native one when it could be built)")
  endif()
endif()

if(NOT CMAKE_C_COMPILER AND NOT DEFINED ENV{CC})
  find_program(AUTOPASS_CLANG NAMES clang-19 clang)
  if(AUTOPASS_CLANG)
    set(CMAKE_C_COMPILER "${AUTOPASS_CLANG}")
  endif()
endif()
if(NOT CMAKE_CXX_COMPILER AND NOT DEFINED ENV{CXX})
  find_program(AUTOPASS_CLANGXX NAMES clang++-19 clang++)
  if(AUTOPASS_CLANGXX)
    set(CMAKE_CXX_COMPILER "${AUTOPASS_CLANGXX}")
  endif()
endif()

# A launcher the build already had (ccache, sccache, distcc: CMAKE_<LANG>_COMPILER_LAUNCHER
# set on the command line, in the cache or in the environment) cannot stay in front of
# autopass's, nor behind it: a cache in front hands back objects built with other flags
# and hides compiles from the recording.  In record and apply mode autopass's takes its
# place, said once per variable at configure time; in off mode the build keeps its own.
macro(_autopass_set_launcher _lang _kind)
  set(_autopass_var CMAKE_${_lang}_${_kind}_LAUNCHER)
  set(_autopass_theirs "${${_autopass_var}}")
  if(NOT _autopass_theirs AND DEFINED ENV{${_autopass_var}})
    set(_autopass_theirs "$ENV{${_autopass_var}}")
  endif()
  if(NOT _autopass_theirs OR _autopass_theirs MATCHES "--autopass-mode=")
    set(${_autopass_var} "${_autopass_launcher}")
  elseif(NOT AUTOPASS_MODE STREQUAL "off")
    message(WARNING "AutoPass: ${_autopass_var} was \"${_autopass_theirs}\": autopass's "
                    "launcher takes its place in ${AUTOPASS_MODE} mode (a launcher in front "
                    "of it would hide compiles from autopass, or hand back objects built "
                    "with other flags). Configure with -DAUTOPASS_MODE=off to build with "
                    "yours.")
    set(${_autopass_var} "${_autopass_launcher}")
  endif()
endmacro()

if(AUTOPASS_MODE STREQUAL "apply")
  set(_autopass_launcher
      "${AUTOPASS_LAUNCHER}"
      "--autopass-mode=apply"
      "--autopass-root=${AUTOPASS_ROOT}"
      "--autopass-db=${AUTOPASS_FLAGS_DB}"
      "--autopass-policy=${AUTOPASS_APPLY_POLICY}")
  foreach(_lang C CXX OBJC OBJCXX)  # links too: an LTO stage adds its link flags
    _autopass_set_launcher(${_lang} COMPILER)
    _autopass_set_launcher(${_lang} LINKER)
  endforeach()
else()
  # Record compiles in one pass where it can: the IR-saving plugin `autopass record` would
  # name, built once per installation (none: two passes, as before).
  set(_autopass_one_pass "")
  if(AUTOPASS_MODE STREQUAL "record" AND AUTOPASS_ONE_PASS)
    execute_process(COMMAND "${AUTOPASS_CC_WRAPPER}" --autopass-ir-plugin
                    OUTPUT_VARIABLE _autopass_plugin RESULT_VARIABLE _autopass_plugin_status
                    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    string(REPLACE "\n" ";" _autopass_plugin "${_autopass_plugin}")
    list(LENGTH _autopass_plugin _autopass_plugin_lines)
    if(_autopass_plugin_status EQUAL 0 AND _autopass_plugin_lines EQUAL 2)
      list(GET _autopass_plugin 0 _autopass_plugin_path)
      list(GET _autopass_plugin 1 _autopass_plugin_for)
      set(_autopass_one_pass "--autopass-ir-plugin=${_autopass_plugin_path}"
                             "--autopass-ir-plugin-for=${_autopass_plugin_for}")
    endif()
  endif()
  set(_autopass_launcher
      "${AUTOPASS_LAUNCHER}"
      "--autopass-mode=${AUTOPASS_MODE}"
      "--autopass-store=${AUTOPASS_STORE}"
      "--autopass-root=${AUTOPASS_ROOT}"
      ${_autopass_one_pass})
  foreach(_lang C CXX OBJC OBJCXX)
    _autopass_set_launcher(${_lang} COMPILER)
    _autopass_set_launcher(${_lang} LINKER)
  endforeach()
endif()
message(STATUS "AutoPass: ${AUTOPASS_MODE} mode, store ${AUTOPASS_STORE}")

# A compiler other than clang (CMAKE_C_COMPILER=gcc) is said once, at configure time:
# record captures nothing from it (it needs clang's LLVM IR) and apply gives it none of
# the tuned flags, and the build itself would not say so.  The compilers are known only
# once project() has enabled the languages: checked at the end of the top directory.
function(_autopass_check_compilers)
  if(AUTOPASS_MODE STREQUAL "off")
    return()
  endif()
  foreach(_lang C CXX)
    if(CMAKE_${_lang}_COMPILER_LOADED AND NOT CMAKE_${_lang}_COMPILER_ID MATCHES "Clang")
      message(WARNING "AutoPass: the ${_lang} compiler is ${CMAKE_${_lang}_COMPILER_ID} "
                      "(${CMAKE_${_lang}_COMPILER}), not clang: in ${AUTOPASS_MODE} mode "
                      "autopass records nothing from it and applies no tuned flags to it. "
                      "Configure with clang instead (-DCMAKE_${_lang}_COMPILER=clang-19 or "
                      "clang++-19), or leave the compiler unset.")
    endif()
  endforeach()
endfunction()
if(CMAKE_VERSION VERSION_GREATER_EQUAL 3.19)
  cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _autopass_check_compilers)
endif()
