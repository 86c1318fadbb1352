# The layers of src/, bottom up (docs/architecture.md, "Layers"). RLX_LAYER_<name> lists the
# folders of layer <name>; a folder may include its own layer and those below. This file is the
# one place the order is written: tests/structure/check_structure.py reads it too.
set(RLX_LAYERS support ir compiler hal kernels devices runtime domains)
set(RLX_LAYER_support support)
set(RLX_LAYER_ir ir)
set(RLX_LAYER_compiler dispatch passes codegen)
set(RLX_LAYER_hal hal)
set(RLX_LAYER_kernels kernels linalg sparse splat dist)
set(RLX_LAYER_devices backends)
set(RLX_LAYER_runtime runtime)
set(RLX_LAYER_domains io models train quant targets)

# rlx_add_layers(SOURCES...): one object library rlx_layer_<name> per layer, from the given
# sources under src/<folder>/. Each compiles with an include path that holds only its own
# folders and those of the layers below: <build>/layers/<name>/ is a tree of links to them, and
# src/ itself is on no layer's path, so an #include that goes up the order fails to compile.
# (An include relative to the file, "../x.h", would step around that; the structure test
# refuses them.) Sets RLX_LAYER_TARGETS in the caller.
function(rlx_add_layers)
  set(targets "")
  set(below "")
  set(placed "")
  foreach(layer ${RLX_LAYERS})
    list(APPEND below ${RLX_LAYER_${layer}})
    set(root ${CMAKE_BINARY_DIR}/layers/${layer})
    file(MAKE_DIRECTORY ${root})
    foreach(folder ${below})
      if(NOT EXISTS ${root}/${folder})
        file(CREATE_LINK ${CMAKE_SOURCE_DIR}/src/${folder} ${root}/${folder} SYMBOLIC)
      endif()
    endforeach()
    string(REPLACE ";" "|" alternatives "${RLX_LAYER_${layer}}")
    set(sources ${ARGN})
    list(FILTER sources INCLUDE REGEX "/src/(${alternatives})/")
    list(APPEND placed ${sources})
    add_library(rlx_layer_${layer} OBJECT ${sources})
    target_include_directories(rlx_layer_${layer} PRIVATE ${CMAKE_SOURCE_DIR}/include ${root})
    list(APPEND targets rlx_layer_${layer})
  endforeach()
  set(unplaced ${ARGN})
  if(placed)
    list(REMOVE_ITEM unplaced ${placed})
  endif()
  if(unplaced)
    message(FATAL_ERROR "rlx: sources in no layer of cmake/RlxLayers.cmake: ${unplaced}")
  endif()
  set(RLX_LAYER_TARGETS ${targets} PARENT_SCOPE)
endfunction()
