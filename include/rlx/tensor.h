// rlx/tensor.h: host tensors. A Tensor is a dtype, concrete sizes and a shared byte buffer,
// which may be owned memory, a memory-mapped file region, or borrowed caller memory.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "rlx/dtype.h"
#include "rlx/shape.h"
#include "rlx/status.h"

namespace rlx {

// A block of bytes whose lifetime is shared by every tensor that views it.
class Storage {
 public:
  virtual ~Storage() = default;
  virtual uint8_t* data() = 0;
  virtual size_t size() const = 0;
};

// Allocates `bytes` zero-initialized bytes aligned to 64; null when the memory is not there.
std::shared_ptr<Storage> allocate_storage(size_t bytes);
// The most bytes one allocation of sizes from outside may take: the machine's physical memory.
uint64_t allocation_limit();
// OK when a tensor of `dtype` and `sizes` can be allocated: no overflow, within
// allocation_limit(); otherwise an error naming `what` and the bytes it needs.
Status check_allocation(DType dtype, const Sizes& sizes, std::string_view what);
// Wraps caller memory; `keep_alive` (may be null) is held as long as the storage lives.
std::shared_ptr<Storage> borrow_storage(void* data, size_t bytes, std::shared_ptr<void> keep_alive);

class Tensor {
 public:
  Tensor() = default;
  // A view of `storage` starting at `byte_offset`; the caller guarantees it is large enough.
  Tensor(DType dtype, Sizes sizes, std::shared_ptr<Storage> storage, size_t byte_offset = 0);

  // A new zero-filled tensor. For sizes the program chose; sizes that come from a file, a
  // flag or a graph go through allocate(). Throws std::bad_alloc when memory runs out (rather
  // than returning a tensor without storage).
  static Tensor zeros(DType dtype, Sizes sizes);
  // A new zero-filled tensor whose sizes come from outside (a graph, a file, a flag): checked
  // before anything is allocated. The element count and byte size must not overflow, and the
  // bytes must fit in this machine's memory (allocation_limit()); errors name `what`.
  static Expected<Tensor> allocate(DType dtype, Sizes sizes, std::string_view what);
  // A new tensor holding `values` converted to `dtype` (used by tests and builders).
  static Tensor from_f64(DType dtype, Sizes sizes, std::span<const double> values);
  template <class T>
  static Tensor from_vector(DType dtype, Sizes sizes, const std::vector<T>& values) {
    std::vector<double> d(values.begin(), values.end());
    return from_f64(dtype, std::move(sizes), d);
  }

  bool defined() const { return storage_ != nullptr || numel() == 0; }
  DType dtype() const { return dtype_; }
  const Sizes& sizes() const { return sizes_; }
  int rank() const { return static_cast<int>(sizes_.size()); }
  int64_t numel() const { return rlx::numel(sizes_); }
  size_t nbytes() const { return dtype_bytes(dtype_, static_cast<size_t>(numel())); }
  TensorType type() const { return TensorType{dtype_, to_shape(sizes_)}; }

  uint8_t* bytes() { return storage_ ? storage_->data() + offset_ : nullptr; }
  const uint8_t* bytes() const { return storage_ ? storage_->data() + offset_ : nullptr; }
  template <class T>
  T* data() { return reinterpret_cast<T*>(bytes()); }
  template <class T>
  const T* data() const { return reinterpret_cast<const T*>(bytes()); }
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  size_t byte_offset() const { return offset_; }

  // Element i (row-major) converted to double; c64 gives the real part, packed types unpack.
  double get_f64(int64_t i) const;
  // Sets element i from a double, converting (saturating casts are not applied: plain C casts).
  void set_f64(int64_t i, double v);
  // Imaginary part of element i of a c64 tensor.
  double get_imag(int64_t i) const;
  void set_imag(int64_t i, double v);
  // All elements as doubles (tests, printing).
  std::vector<double> to_f64() const;
  // A deep copy with its own storage.
  Tensor clone() const;
  // Same bytes, new sizes with the same element count.
  Expected<Tensor> reshaped(Sizes sizes) const;
  // "f32[2, 3] [1, 2, 3, 4, 5, 6]", eliding after `max_elems`.
  std::string to_string(int64_t max_elems = 16) const;

 private:
  DType dtype_ = DType::f32;
  Sizes sizes_;
  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;
};

}  // namespace rlx
