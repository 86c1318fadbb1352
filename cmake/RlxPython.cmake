# Finds Python 3 (development files) and pybind11 and adds python/; says why when it cannot.
# Debian's /usr/bin/python3 is preferred over a python3 on PATH (a pyenv build here sees none
# of Debian's modules: numpy, torch, onnx, pytest); -DPython3_EXECUTABLE=... overrides it.
if(NOT DEFINED Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
  set(Python3_EXECUTABLE /usr/bin/python3)
endif()
find_package(Python3 COMPONENTS Interpreter Development)
if(Python3_FOUND)
  find_package(pybind11 CONFIG QUIET)
endif()
if(Python3_FOUND AND pybind11_FOUND)
  message(STATUS "rlx: Python module for ${Python3_EXECUTABLE} (${Python3_VERSION}), pybind11 ${pybind11_VERSION}")
  set(RLX_HAVE_PYTHON ON)
  add_subdirectory(${CMAKE_SOURCE_DIR}/python ${CMAKE_BINARY_DIR}/python-build)
else()
  message(STATUS "rlx: Python module NOT built: needs Python 3 with its development files and pybind11 "
                 "(Debian: python3-dev pybind11-dev); the rest of rlx builds without it")
  set(RLX_HAVE_PYTHON OFF)
endif()
