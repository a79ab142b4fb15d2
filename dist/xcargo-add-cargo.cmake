# xcargo_add_cargo(NAME SOURCES src... [KEY private-key] [TARGETS variant...] [OUTPUT file]
#                  [INCLUDE_DIRS dir...] [DEFINES macro...] [VERSION v] [FP contract|strict]
#                  [OPT level] [DEPENDS file...])
# Builds NAME.xcargo (in the current binary directory unless OUTPUT) with `xcargo build`
# whenever a source, a header it includes, the key or xcargo itself changes; a target NAME,
# built by default, stands for it, and its XCARGO_FILE property names the file.
# TARGETS are xcargo build's -t values (default: bitcode x86_64 aarch64).
function(xcargo_add_cargo name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "KEY;OUTPUT;VERSION;FP;OPT" "SOURCES;TARGETS;INCLUDE_DIRS;DEFINES;DEPENDS")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "xcargo_add_cargo(${name}): unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT arg_SOURCES)
    message(FATAL_ERROR "xcargo_add_cargo(${name}): no SOURCES")
  endif()
  set(out ${CMAKE_CURRENT_BINARY_DIR}/${name}.xcargo)
  if(arg_OUTPUT)
    cmake_path(ABSOLUTE_PATH arg_OUTPUT BASE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR} OUTPUT_VARIABLE out)
  endif()
  set(args build -o ${out} --name ${name} --depfile ${out}.d)
  set(deps)
  foreach(s ${arg_SOURCES})
    cmake_path(ABSOLUTE_PATH s BASE_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR} OUTPUT_VARIABLE s)
    list(APPEND args ${s})
    list(APPEND deps ${s})
  endforeach()
  if(arg_KEY)
    cmake_path(ABSOLUTE_PATH arg_KEY BASE_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR} OUTPUT_VARIABLE key)
    list(APPEND args --key ${key})
    list(APPEND deps ${key})
  endif()
  foreach(t ${arg_TARGETS})
    list(APPEND args -t ${t})
  endforeach()
  foreach(d ${arg_INCLUDE_DIRS})
    cmake_path(ABSOLUTE_PATH d BASE_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR} OUTPUT_VARIABLE d)
    list(APPEND args -I ${d})
  endforeach()
  foreach(d ${arg_DEFINES})
    list(APPEND args -D ${d})
  endforeach()
  if(arg_VERSION)
    list(APPEND args --cargo-version ${arg_VERSION})
  endif()
  if(arg_FP)
    list(APPEND args --fp ${arg_FP})
  endif()
  if(arg_OPT)
    list(APPEND args -O ${arg_OPT})
  endif()
  add_custom_command(OUTPUT ${out}
    COMMAND xcargo::xcargo ${args}
    DEPENDS ${deps} ${arg_DEPENDS} xcargo::xcargo
    DEPFILE ${out}.d
    COMMENT "Building cargo ${name}"
    VERBATIM)
  add_custom_target(${name} ALL DEPENDS ${out})
  set_target_properties(${name} PROPERTIES XCARGO_FILE ${out})
endfunction()
