// Shared pieces of the Python module rlx._rlx: errors, NumPy <-> Tensor conversion, and the
// graph state that lazy tensors point into.
#pragma once

#include <memory>
#include <string>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "rlx/graph.h"
#include "rlx/status.h"
#include "rlx/tensor.h"

namespace rlx::py_bind {

namespace py = pybind11;

// A C++ error on its way to Python; the module's translator raises rlx.Error with the same
// message and the error code's name in `code`.
struct StatusError {
  Status status;
};

[[noreturn]] inline void raise(Status s) { throw StatusError{std::move(s)}; }
inline void check(const Status& s) {
  if (!s.is_ok()) raise(s);
}
template <class T>
T unwrap(Expected<T>&& e) {
  if (!e.has_value()) raise(std::move(e).take_status());
  return std::move(e).value();
}

// Registers rlx.Error and the translator (module.cpp).
void register_errors(py::module_& m);

// The NumPy dtype of an rlx dtype; bf16, i4 and u4 have none (error).
py::dtype numpy_dtype(DType t);
// The rlx dtype of a NumPy dtype; error naming `what` for dtypes rlx lacks.
DType dtype_of_numpy(const py::dtype& d, const std::string& what);
// "f32" etc. from a name, accepting NumPy spellings ("float32") and NumPy dtypes as well.
DType dtype_from_py(const py::handle& h);

// A Tensor over a NumPy array's memory when it is C-contiguous and aligned (the array is kept
// alive by the tensor), otherwise over a contiguous copy. `expect` (optional) is the dtype
// the caller needs: a different array dtype is an error naming `what`.
Tensor tensor_from_array(const py::handle& obj, const std::string& what, const DType* expect = nullptr);
// A deep copy (for weights, which the graph keeps).
Tensor tensor_copy_from_array(const py::handle& obj, const std::string& what);
// A writable NumPy array viewing the tensor's memory (the array keeps the storage alive);
// bf16 is converted to float32 (NumPy has no bfloat16).
py::array array_from_tensor(const Tensor& t);

// Text from C++ (tokenizer output may hold broken UTF-8): decoded with replacement characters.
py::str utf8_str(const std::string& s);

// A graph being built from Python: lazy tensors hold a shared pointer to it.
struct GraphState {
  Graph graph;
  std::string format;                          // for loaded models
  std::map<std::string, std::string> metadata;
};
using GraphPtr = std::shared_ptr<GraphState>;

// A lazy tensor: a value of a graph under construction.
struct LazyTensor {
  GraphPtr g;
  ValueId id = kNoValue;
};

void bind_graph(py::module_& m);    // graph.cpp
void bind_runtime(py::module_& m);  // runtime.cpp
void bind_entry(py::module_& m);    // entry.cpp

}  // namespace rlx::py_bind
