# MESHRL_SANITIZE: compile and link our own targets with sanitizers. libtorch, gRPC, protobuf and
# GoogleTest are prebuilt Debian libraries, so they stay uninstrumented whatever this says; only the
# code this project compiles (src/, proto/ generated code, tests/, bench/) is checked.
#   address,undefined  ASan + UBSan; UB aborts the process (-fno-sanitize-recover) so a test fails
#   thread             TSan, for the coordinator's concurrency tests (tests/sanitize/tsan.supp)
# Runtime options and suppression files: tests/sanitize/. Off (empty) changes nothing in a build.

# Every executable of a sanitize build gets tests/sanitize/sanitizer_defaults.cpp (its runtime
# options and suppression files). Called once at the end of the top-level CMakeLists.txt, when
# every target exists.
function(meshrl_add_sanitizer_defaults)
  if(MESHRL_SANITIZERS STREQUAL "")
    return()
  endif()
  set(dirs ${CMAKE_SOURCE_DIR})
  while(dirs)
    list(POP_FRONT dirs dir)
    get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
    list(APPEND dirs ${subdirs})
    get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
    foreach(t ${targets})
      get_target_property(type ${t} TYPE)
      if(type STREQUAL "EXECUTABLE")
        target_sources(${t} PRIVATE ${CMAKE_SOURCE_DIR}/tests/sanitize/sanitizer_defaults.cpp)
        set_source_files_properties(${CMAKE_SOURCE_DIR}/tests/sanitize/sanitizer_defaults.cpp
          TARGET_DIRECTORY ${t} PROPERTIES
          COMPILE_DEFINITIONS "MESHRL_SANITIZE_DIR=\"${CMAKE_SOURCE_DIR}/tests/sanitize\""
          SKIP_PRECOMPILE_HEADERS ON)
      endif()
    endforeach()
  endwhile()
endfunction()

string(TOLOWER "${MESHRL_SANITIZE}" _meshrl_sanitize)
if(_meshrl_sanitize MATCHES "^(on|true|yes|1)$")
  set(_meshrl_sanitize "address,undefined")   # the old boolean option meant ASan + UBSan
elseif(_meshrl_sanitize MATCHES "^(off|false|no|0)$")
  set(_meshrl_sanitize "")
endif()
set(MESHRL_SANITIZERS "${_meshrl_sanitize}")

if(MESHRL_SANITIZERS STREQUAL "")
  return()
endif()
if(MESHRL_FUZZ)
  message(FATAL_ERROR "MESHRL_SANITIZE and MESHRL_FUZZ are exclusive: the fuzz build sets its own sanitizers")
endif()

if(MESHRL_SANITIZERS STREQUAL "address,undefined" OR MESHRL_SANITIZERS STREQUAL "undefined,address")
  set(MESHRL_SANITIZERS "address,undefined")
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined)
elseif(MESHRL_SANITIZERS STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
else()
  message(FATAL_ERROR "MESHRL_SANITIZE='${MESHRL_SANITIZE}': expected address,undefined or thread (or empty)")
endif()
message(STATUS "meshrl: sanitizers ${MESHRL_SANITIZERS} on our own targets")
