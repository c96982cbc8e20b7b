# Dependencies of the MESHRL_TORCH_ONLY build (CMakeLists.txt), for a machine that has a C++
# compiler, CMake and some PyTorch but none of our Debian development packages: scripts/device-check
# unpacks Debian's .deb files into a private root and passes it in CMAKE_PREFIX_PATH.
#
# Defines the targets the torch libraries link, under the names the normal build uses:
#   PkgConfig::PCRE2, PkgConfig::XXHASH  header + library, static first, found with find_path /
#                                        find_library (CMAKE_PREFIX_PATH first), pkg-config last
#   tomlplusplus::tomlplusplus           toml++ headers, header-only mode (core/toml_document.cpp)
#   Torch                                find_package(Torch), or with MESHRL_TORCH_ROOT a torch
#                                        folder used directly (TORCH_LIBRARIES, TORCH_CXX_FLAGS)
# Included at file scope on purpose: the CUDA part of TorchConfig.cmake calls enable_language(CUDA),
# which a function scope would refuse.

# A C library as an INTERFACE IMPORTED target named PkgConfig::<name>. pkg-config only as a last
# resort: the .pc files inside Debian's packages say prefix=/usr, which is wrong once they are
# unpacked anywhere else, and would send the compiler to headers that are not there.
function(meshrl_find_c_library name header pkg_module)
  find_path(MESHRL_${name}_INCLUDE_DIR ${header})
  # Static archive first: the binary then needs no shared library beside libtorch's.
  find_library(MESHRL_${name}_LIBRARY NAMES ${ARGN})
  add_library(PkgConfig::${name} INTERFACE IMPORTED)
  if(MESHRL_${name}_INCLUDE_DIR AND MESHRL_${name}_LIBRARY)
    message(STATUS "torch-only: ${name}: ${MESHRL_${name}_LIBRARY} (headers ${MESHRL_${name}_INCLUDE_DIR})")
    set_target_properties(PkgConfig::${name} PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${MESHRL_${name}_INCLUDE_DIR}"
      INTERFACE_LINK_LIBRARIES "${MESHRL_${name}_LIBRARY}")
    return()
  endif()
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(MESHRL_PC_${name} QUIET IMPORTED_TARGET ${pkg_module})
    if(TARGET PkgConfig::MESHRL_PC_${name})
      message(STATUS "torch-only: ${name}: from pkg-config (${pkg_module})")
      set_target_properties(PkgConfig::${name} PROPERTIES INTERFACE_LINK_LIBRARIES PkgConfig::MESHRL_PC_${name})
      return()
    endif()
  endif()
  message(FATAL_ERROR "torch-only: ${name} not found (header ${header}: '${MESHRL_${name}_INCLUDE_DIR}', "
                      "library ${ARGN}: '${MESHRL_${name}_LIBRARY}'). Put its prefix (e.g. an unpacked .deb's usr/) "
                      "in CMAKE_PREFIX_PATH.")
endfunction()

meshrl_find_c_library(PCRE2 pcre2.h libpcre2-8 libpcre2-8.a pcre2-8)
meshrl_find_c_library(XXHASH xxhash.h libxxhash libxxhash.a xxhash)

# toml++: core/toml_document.cpp and the config files built on it (rl/run_config.cpp, tasks/task_config.cpp).
# Header-only mode, so no libtomlplusplus.so has to travel.
find_path(MESHRL_TOMLPP_INCLUDE_DIR toml++/toml.h)
if(NOT MESHRL_TOMLPP_INCLUDE_DIR)
  message(FATAL_ERROR "torch-only: toml++ headers (toml++/toml.h) not found; put libtomlplusplus-dev's usr/ in CMAKE_PREFIX_PATH")
endif()
add_library(tomlplusplus::tomlplusplus INTERFACE IMPORTED)
set_target_properties(tomlplusplus::tomlplusplus PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "${MESHRL_TOMLPP_INCLUDE_DIR}"
  INTERFACE_COMPILE_DEFINITIONS "TOML_HEADER_ONLY=1")
message(STATUS "torch-only: toml++ headers ${MESHRL_TOMLPP_INCLUDE_DIR} (header-only)")

# Torch. MESHRL_TORCH_ROOT (a pip wheel's torch/ folder: include/, lib/) skips TorchConfig.cmake,
# whose CUDA part needs a complete CUDA toolkit (nvcc, cuda.h, cuBLAS, ...) even for a program
# that includes no CUDA header; we only need libtorch's headers and its libraries.
set(MESHRL_TORCH_ROOT "" CACHE PATH "torch-only: use this torch folder (include/, lib/) without its CMake config")
set(MESHRL_TORCH_CXX11_ABI "1" CACHE STRING "torch-only with MESHRL_TORCH_ROOT: _GLIBCXX_USE_CXX11_ABI of that torch (torch._C._GLIBCXX_USE_CXX11_ABI)")
if(MESHRL_TORCH_ROOT)
  set(_lib "${MESHRL_TORCH_ROOT}/lib")
  foreach(l torch torch_cpu c10)
    find_library(MESHRL_TORCH_LIB_${l} ${l} PATHS "${_lib}" NO_DEFAULT_PATH)
    if(NOT MESHRL_TORCH_LIB_${l})
      message(FATAL_ERROR "torch-only: lib${l}.so not found in ${_lib} (MESHRL_TORCH_ROOT)")
    endif()
  endforeach()
  add_library(meshrl_torch_direct INTERFACE)
  target_include_directories(meshrl_torch_direct SYSTEM INTERFACE
    "${MESHRL_TORCH_ROOT}/include" "${MESHRL_TORCH_ROOT}/include/torch/csrc/api/include")
  target_link_libraries(meshrl_torch_direct INTERFACE
    ${MESHRL_TORCH_LIB_torch} ${MESHRL_TORCH_LIB_torch_cpu} ${MESHRL_TORCH_LIB_c10})
  # libtorch_cuda registers the CUDA backend from its static initialisers; nothing of ours refers
  # to one of its symbols, so a linker that drops unneeded libraries (--as-needed, Ubuntu's
  # default) would leave it out and torch::cuda::is_available() would say false.
  foreach(l torch_cuda c10_cuda)
    find_library(MESHRL_TORCH_LIB_${l} ${l} PATHS "${_lib}" NO_DEFAULT_PATH)
    if(MESHRL_TORCH_LIB_${l})
      target_link_libraries(meshrl_torch_direct INTERFACE ${MESHRL_TORCH_LIB_${l}})
      set(_torch_has_cuda ON)
    endif()
  endforeach()
  if(_torch_has_cuda)
    target_link_options(meshrl_torch_direct INTERFACE "LINKER:--no-as-needed")
  endif()
  set(TORCH_LIBRARIES meshrl_torch_direct)
  set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI=${MESHRL_TORCH_CXX11_ABI}")
  message(STATUS "torch-only: torch used directly from ${MESHRL_TORCH_ROOT} (CUDA libraries: ${_torch_has_cuda})")
else()
  find_package(Torch REQUIRED)
  message(STATUS "torch-only: Torch ${Torch_VERSION} from ${Torch_DIR}")
endif()
# The torch-free libraries (core, tokenizer, tasks) must use libtorch's std::string ABI too.
separate_arguments(_torch_cxx_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
add_compile_options(${_torch_cxx_flags})
