// rlx._rlx: the native half of the Python package `rlx` (python/rlx/__init__.py is the other).
// This file holds errors and NumPy conversion; graph.cpp the lazy tensor API, runtime.cpp
// devices / loading / compiling / running, entry.cpp embed, generate and train.
#include <cstdint>
#include <cstring>

#include "bindings.h"

namespace rlx::py_bind {

namespace {
PyObject* g_error_type = nullptr;  // rlx.Error, created once at import
}

void register_errors(py::module_& m) {
  g_error_type = PyErr_NewExceptionWithDoc(
      "rlx.Error",
      "An rlx operation failed. str(e) is the C++ error message; e.code names the error kind "
      "(invalid_argument, shape_error, illegal, io_error, format_error, unavailable, ...).",
      PyExc_RuntimeError, nullptr);
  m.add_object("Error", py::handle(g_error_type));
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      py::object exc = py::reinterpret_steal<py::object>(
          PyObject_CallFunction(g_error_type, "s", e.status.message().c_str()));
      if (!exc) return;  // a Python error is already set
      // the ErrorCode enumerator's name ("shape_error"; error_code_name spells it "shape error")
      std::string code(error_code_name(e.status.code()));
      for (char& c : code)
        if (c == ' ') c = '_';
      PyObject_SetAttrString(exc.ptr(), "code", py::str(code).ptr());
      PyErr_SetObject(g_error_type, exc.ptr());
    }
  });
}

py::dtype numpy_dtype(DType t) {
  const char* name = nullptr;
  switch (t) {
    case DType::f32: name = "float32"; break;
    case DType::f16: name = "float16"; break;
    case DType::f64: name = "float64"; break;
    case DType::c64: name = "complex64"; break;
    case DType::i8: name = "int8"; break;
    case DType::u8: name = "uint8"; break;
    case DType::i16: name = "int16"; break;
    case DType::u16: name = "uint16"; break;
    case DType::i32: name = "int32"; break;
    case DType::u32: name = "uint32"; break;
    case DType::i64: name = "int64"; break;
    case DType::u64: name = "uint64"; break;
    case DType::boolean: name = "bool"; break;
    default:
      raise(error(ErrorCode::unsupported, "NumPy has no dtype for rlx's ", dtype_name(t)));
  }
  return py::dtype::from_args(py::str(name));
}

DType dtype_of_numpy(const py::dtype& d, const std::string& what) {
  const char kind = d.kind();
  const auto size = d.itemsize();
  if (kind == 'f' && size == 4) return DType::f32;
  if (kind == 'f' && size == 2) return DType::f16;
  if (kind == 'f' && size == 8) return DType::f64;
  if (kind == 'c' && size == 8) return DType::c64;
  if (kind == 'b' && size == 1) return DType::boolean;
  if (kind == 'i' || kind == 'u') {
    const bool s = kind == 'i';
    switch (size) {
      case 1: return s ? DType::i8 : DType::u8;
      case 2: return s ? DType::i16 : DType::u16;
      case 4: return s ? DType::i32 : DType::u32;
      case 8: return s ? DType::i64 : DType::u64;
      default: break;
    }
  }
  raise(error(ErrorCode::dtype_error, what, ": NumPy dtype ", std::string(py::str(py::handle(d))), " has no rlx dtype"));
}

DType dtype_from_py(const py::handle& h) {
  if (py::isinstance<py::str>(h)) {
    const std::string s = h.cast<std::string>();
    if (auto t = parse_dtype(s)) return *t;
    try {
      return dtype_of_numpy(py::dtype::from_args(py::str(s)), "dtype");
    } catch (const py::error_already_set&) {
      raise(error(ErrorCode::invalid_argument, "unknown dtype '", s, "'"));
    }
  }
  return dtype_of_numpy(py::dtype::from_args(py::reinterpret_borrow<py::object>(h)), "dtype");
}

namespace {

// Keeps a Python object alive from C++; releasing it takes the GIL (the tensor may die on a
// thread that does not hold it, e.g. inside a run with the GIL released).
std::shared_ptr<void> keep_alive(py::object o) {
  auto* p = new py::object(std::move(o));
  return std::shared_ptr<void>(p, [](void* q) {
    py::gil_scoped_acquire gil;
    delete static_cast<py::object*>(q);
  });
}

py::array as_array(const py::handle& obj, const DType* expect) {
  if (py::isinstance<py::array>(obj)) return py::reinterpret_borrow<py::array>(obj);
  // lists, scalars, objects with __array__: converted in the dtype the caller needs
  py::module_ np = py::module_::import("numpy");
  if (expect) return np.attr("asarray")(obj, numpy_dtype(*expect));
  return np.attr("asarray")(obj);
}

Sizes sizes_of(const py::array& a) {
  Sizes s;
  for (py::ssize_t i = 0; i < a.ndim(); ++i) s.push_back(static_cast<int64_t>(a.shape(i)));
  return s;
}

}  // namespace

Tensor tensor_from_array(const py::handle& obj, const std::string& what, const DType* expect) {
  py::array a = as_array(obj, expect);
  const DType dt = dtype_of_numpy(a.dtype(), what);
  if (expect && dt != *expect)
    raise(error(ErrorCode::dtype_error, what, ": expected ", dtype_name(*expect), ", got a NumPy array of ",
                dtype_name(dt), " (convert it with .astype)"));
  const int flags = py::array::c_style;
  const bool aligned = (reinterpret_cast<uintptr_t>(a.data()) % static_cast<uintptr_t>(a.itemsize())) == 0;
  if (!(a.flags() & flags) || !aligned) {
    a = py::module_::import("numpy").attr("ascontiguousarray")(a);  // a copy, then borrowed
  }
  Sizes s = sizes_of(a);
  const size_t bytes = dtype_bytes(dt, static_cast<size_t>(numel(s)));
  auto storage = borrow_storage(const_cast<void*>(a.data()), bytes, keep_alive(a));
  return Tensor(dt, std::move(s), std::move(storage));
}

Tensor tensor_copy_from_array(const py::handle& obj, const std::string& what) {
  return tensor_from_array(obj, what).clone();
}

py::array array_from_tensor(const Tensor& t) {
  if (t.dtype() == DType::bf16) {
    Tensor f = Tensor::zeros(DType::f32, t.sizes());
    for (int64_t i = 0; i < t.numel(); ++i) f.data<float>()[i] = bf16_to_f32(t.data<uint16_t>()[i]);
    return array_from_tensor(f);
  }
  py::dtype dt = numpy_dtype(t.dtype());
  std::vector<py::ssize_t> shape(t.sizes().begin(), t.sizes().end());
  std::vector<py::ssize_t> strides(shape.size());
  py::ssize_t st = dt.itemsize();
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = st;
    st *= shape[i];
  }
  Tensor keep = t;
  if (!keep.bytes()) keep = Tensor::zeros(t.dtype(), t.sizes());  // empty tensors have no storage
  auto* owner = new Tensor(keep);
  py::capsule base(owner, [](void* p) { delete static_cast<Tensor*>(p); });
  return py::array(dt, shape, strides, owner->bytes(), base);
}

py::str utf8_str(const std::string& s) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace");
  if (!o) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

}  // namespace rlx::py_bind

PYBIND11_MODULE(_rlx, m) {
  using namespace rlx::py_bind;
  m.doc() = "rlx, a tensor compiler and runtime: the native module (use `import rlx`).";
  register_errors(m);
  m.def(
      "_shares_memory",
      [](const py::object& a, const std::string& dtype) {
        rlx::DType dt = dtype_from_py(py::str(dtype));
        rlx::Tensor t = tensor_from_array(a, "array", &dt);
        return static_cast<const void*>(t.bytes()) == py::array(a).data();
      },
      "Whether an input array is passed to rlx without a copy (for tests).");
  bind_graph(m);
  bind_runtime(m);
  bind_entry(m);
}
