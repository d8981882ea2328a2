# The library's layers (docs/ARCHITECTURE.md): each an OBJECT library compiled against a view of
# the headers it may include, so an include that climbs a layer, or reaches a layer it does not
# depend on, fails to compile ("No such file or directory").
#
# A layer's view is a folder of the build tree, <build>/layers/<name>, holding symbolic links:
#   <view>/<folder>          → src/<folder>                      (FOLDERS: a folder and its subfolders)
#   <view>/<folder>/<x>.hpp  → src/<folder>/<x>.hpp              (TOP_LEVEL: a folder's own headers only)
#   <view>/cuinline/<x>.hpp  → include/cuinline/<x>.hpp          (PUBLIC_HEADERS: the public headers it owns)
# A layer compiles with its own view and the views of the layers it DEPENDS on (PRIVATE: a layer names
# every layer whose headers it reaches, through its own headers included). Sources are globbed
# (CONFIGURE_DEPENDS), so a new .cpp or .hpp in a layer's folder is picked up without editing CMake;
# the views are made anew at every configure, so a removed header leaves no link behind.

set(CUINLINE_LAYERS_DIR ${PROJECT_BINARY_DIR}/layers)
set(CUINLINE_LAYER_TARGETS)

function(_cuinline_link target link)
  get_filename_component(_parent ${link} DIRECTORY)
  file(MAKE_DIRECTORY ${_parent})
  file(CREATE_LINK ${target} ${link} SYMBOLIC)
endfunction()

# cuinline_layer_view(<name> [FOLDERS ...] [TOP_LEVEL ...] [PUBLIC_HEADERS ...] [GENERATED_HEADERS ...])
# Makes <build>/layers/<name> and sets CUINLINE_LAYER_VIEW in the caller's scope.
function(cuinline_layer_view name)
  cmake_parse_arguments(L "" "" "FOLDERS;TOP_LEVEL;PUBLIC_HEADERS;GENERATED_HEADERS" ${ARGN})
  set(view ${CUINLINE_LAYERS_DIR}/${name})
  file(REMOVE_RECURSE ${view})
  file(MAKE_DIRECTORY ${view})
  foreach(folder IN LISTS L_FOLDERS)
    _cuinline_link(${PROJECT_SOURCE_DIR}/src/${folder} ${view}/${folder})
  endforeach()
  foreach(folder IN LISTS L_TOP_LEVEL)
    file(MAKE_DIRECTORY ${view}/${folder})
    # CONFIGURE_DEPENDS: a header added to the folder re-runs the configure, which links it.
    file(GLOB _headers CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${folder}/*.hpp)
    foreach(header IN LISTS _headers)
      get_filename_component(_name ${header} NAME)
      _cuinline_link(${header} ${view}/${folder}/${_name})
    endforeach()
  endforeach()
  foreach(header IN LISTS L_PUBLIC_HEADERS)
    if(NOT EXISTS ${PROJECT_SOURCE_DIR}/include/cuinline/${header})
      message(FATAL_ERROR "cuinline layer ${name}: no public header include/cuinline/${header}")
    endif()
    _cuinline_link(${PROJECT_SOURCE_DIR}/include/cuinline/${header} ${view}/cuinline/${header})
  endforeach()
  foreach(header IN LISTS L_GENERATED_HEADERS)
    get_filename_component(_name ${header} NAME)
    _cuinline_link(${header} ${view}/cuinline/${_name})
  endforeach()
  set(CUINLINE_LAYER_VIEW ${view} PARENT_SCOPE)
endfunction()

# cuinline_layer(<name> [FOLDERS ...] [TOP_LEVEL ...] [PUBLIC_HEADERS ...] [GENERATED_HEADERS ...]
#                [SOURCES extra.cpp ...] [EXCLUDE src/.../x.cpp ...] [DEPENDS <layer> ...])
# The OBJECT library cuinline_<name>: every .cpp of its folders (recursive for FOLDERS, the folder's
# own for TOP_LEVEL) plus SOURCES, less EXCLUDE; compiled against its view and its DEPENDS' views.
function(cuinline_layer name)
  cmake_parse_arguments(L "" "" "FOLDERS;TOP_LEVEL;PUBLIC_HEADERS;GENERATED_HEADERS;SOURCES;EXCLUDE;DEPENDS" ${ARGN})
  cuinline_layer_view(${name} FOLDERS ${L_FOLDERS} TOP_LEVEL ${L_TOP_LEVEL}
                      PUBLIC_HEADERS ${L_PUBLIC_HEADERS} GENERATED_HEADERS ${L_GENERATED_HEADERS})
  set(sources ${L_SOURCES})
  foreach(folder IN LISTS L_FOLDERS)
    file(GLOB_RECURSE _found CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${folder}/*.cpp)
    list(APPEND sources ${_found})
  endforeach()
  foreach(folder IN LISTS L_TOP_LEVEL)
    file(GLOB _found CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${folder}/*.cpp)
    list(APPEND sources ${_found})
  endforeach()
  if(L_EXCLUDE)
    list(REMOVE_ITEM sources ${L_EXCLUDE})
  endif()
  # A relative include ("../driver/x.hpp") is found beside the including file whatever the view:
  # refused here, so the views stay the only way in.
  set(_files ${sources})
  foreach(folder IN LISTS L_FOLDERS)
    file(GLOB_RECURSE _headers CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${folder}/*.hpp)
    list(APPEND _files ${_headers})
  endforeach()
  foreach(folder IN LISTS L_TOP_LEVEL)
    file(GLOB _headers CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${folder}/*.hpp)
    list(APPEND _files ${_headers})
  endforeach()
  foreach(file IN LISTS _files)
    if(EXISTS ${file})
      file(STRINGS ${file} _relative REGEX [[^[ 	]*#[ 	]*include[ 	]*"\.\./]])
      if(_relative)
        message(FATAL_ERROR "cuinline layer ${name}: ${file} includes by a relative path (${_relative}); "
                            "include <folder>/<header> of a layer it depends on")
      endif()
    endif()
  endforeach()
  add_library(cuinline_${name} OBJECT ${sources})
  target_include_directories(cuinline_${name} PUBLIC ${CUINLINE_LAYER_VIEW})
  foreach(dep IN LISTS L_DEPENDS)
    if(NOT TARGET cuinline_${dep})
      message(FATAL_ERROR "cuinline layer ${name}: depends on ${dep}, which is not a layer below it")
    endif()
    target_link_libraries(cuinline_${name} PRIVATE cuinline_${dep})
  endforeach()
  target_compile_features(cuinline_${name} PRIVATE cxx_std_17)
  target_compile_options(cuinline_${name} PRIVATE -Wall -Wextra -Wpedantic)
  # Headers only (cuda.h, spdlog, OpenSSL): what the objects link is linked by cuinline itself.
  target_link_libraries(cuinline_${name} PRIVATE CUDA::toolkit spdlog::spdlog OpenSSL::Crypto Threads::Threads)
  target_compile_definitions(cuinline_${name} PRIVATE CUINLINE_CUDA_INCLUDE_DIR="${CUINLINE_CUDA_INCLUDE_DIR}"
    CUINLINE_HAVE_GENERIC_KERNELS=${CUINLINE_HAVE_GENERIC_KERNELS})
  set(CUINLINE_LAYER_TARGETS ${CUINLINE_LAYER_TARGETS} cuinline_${name} PARENT_SCOPE)
endfunction()
