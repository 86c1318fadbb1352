#include "rlx/tensor.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <sstream>

#include "rlx/checked.h"

namespace rlx {
namespace {

class OwnedStorage final : public Storage {
 public:
  explicit OwnedStorage(size_t bytes) : size_(bytes) {
    size_t rounded = (bytes + 63) / 64 * 64;
    data_ = static_cast<uint8_t*>(std::aligned_alloc(64, rounded == 0 ? 64 : rounded));
    if (data_) std::memset(data_, 0, rounded == 0 ? 64 : rounded);
  }
  ~OwnedStorage() override { std::free(data_); }
  uint8_t* data() override { return data_; }
  size_t size() const override { return size_; }
  bool ok() const { return data_ != nullptr; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_;
};

class BorrowedStorage final : public Storage {
 public:
  BorrowedStorage(void* data, size_t size, std::shared_ptr<void> keep)
      : data_(static_cast<uint8_t*>(data)), size_(size), keep_(std::move(keep)) {}
  uint8_t* data() override { return data_; }
  size_t size() const override { return size_; }

 private:
  uint8_t* data_;
  size_t size_;
  std::shared_ptr<void> keep_;
};

template <class T>
T load(const uint8_t* p, int64_t i) {
  T v;
  std::memcpy(&v, p + i * sizeof(T), sizeof(T));
  return v;
}
template <class T>
void store(uint8_t* p, int64_t i, T v) {
  std::memcpy(p + i * sizeof(T), &v, sizeof(T));
}

}  // namespace

std::shared_ptr<Storage> allocate_storage(size_t bytes) {
  auto s = std::make_shared<OwnedStorage>(bytes);
  if (!s->ok()) return nullptr;
  return s;
}

std::shared_ptr<Storage> borrow_storage(void* data, size_t bytes, std::shared_ptr<void> keep) {
  return std::make_shared<BorrowedStorage>(data, bytes, std::move(keep));
}

Tensor::Tensor(DType dtype, Sizes sizes, std::shared_ptr<Storage> storage, size_t byte_offset)
    : dtype_(dtype), sizes_(std::move(sizes)), storage_(std::move(storage)), offset_(byte_offset) {}

uint64_t allocation_limit() {
  static const uint64_t limit = [] {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : uint64_t{1} << 40;
  }();
  return limit;
}

Status check_allocation(DType dtype, const Sizes& sizes, std::string_view what) {
  uint64_t n = 1;
  for (int64_t s : sizes) {
    if (s < 0) return error(ErrorCode::invalid_argument, what, ": negative size ", s);
    const auto m = checked_mul(n, static_cast<uint64_t>(s));
    if (!m) return error(ErrorCode::overflow, what, ": ", sizes_to_string(sizes), " has more elements than 64 bits count");
    n = *m;
  }
  // bytes of n elements, rounded up to a group of 8 (sub-byte dtypes pack several a byte)
  const uint64_t per8 = dtype_bytes(dtype, 8);
  const auto bytes = checked_mul(n / 8 + 1, per8);
  if (!bytes) return error(ErrorCode::overflow, what, ": ", dtype_name(dtype), sizes_to_string(sizes), " overflows 64-bit byte counts");
  if (*bytes > allocation_limit())
    return error(ErrorCode::out_of_range, what, ": ", dtype_name(dtype), sizes_to_string(sizes), " needs ", *bytes,
                 " bytes, more than this machine's ", allocation_limit(), " bytes of memory");
  return Status::ok();
}

Tensor Tensor::zeros(DType dtype, Sizes sizes) {
  size_t bytes = dtype_bytes(dtype, static_cast<size_t>(rlx::numel(sizes)));
  std::shared_ptr<Storage> s = allocate_storage(bytes);
  if (!s) throw std::bad_alloc();
  return Tensor(dtype, std::move(sizes), std::move(s));
}

Expected<Tensor> Tensor::allocate(DType dtype, Sizes sizes, std::string_view what) {
  RLX_TRY(check_allocation(dtype, sizes, what));
  const size_t bytes = dtype_bytes(dtype, static_cast<size_t>(rlx::numel(sizes)));
  std::shared_ptr<Storage> s = allocate_storage(bytes);
  if (!s) return error(ErrorCode::out_of_range, what, ": cannot allocate ", bytes, " bytes");
  return Tensor(dtype, std::move(sizes), std::move(s));
}

Tensor Tensor::from_f64(DType dtype, Sizes sizes, std::span<const double> values) {
  Tensor t = zeros(dtype, std::move(sizes));
  int64_t n = std::min<int64_t>(t.numel(), static_cast<int64_t>(values.size()));
  for (int64_t i = 0; i < n; ++i) t.set_f64(i, values[i]);
  return t;
}

double Tensor::get_f64(int64_t i) const {
  const uint8_t* p = bytes();
  switch (dtype_) {
    case DType::f32: return load<float>(p, i);
    case DType::f16: return f16_to_f32(load<uint16_t>(p, i));
    case DType::bf16: return bf16_to_f32(load<uint16_t>(p, i));
    case DType::f64: return load<double>(p, i);
    case DType::c64: return load<float>(p, 2 * i);
    case DType::i8: return load<int8_t>(p, i);
    case DType::u8: return load<uint8_t>(p, i);
    case DType::i16: return load<int16_t>(p, i);
    case DType::u16: return load<uint16_t>(p, i);
    case DType::i32: return load<int32_t>(p, i);
    case DType::u32: return load<uint32_t>(p, i);
    case DType::i64: return static_cast<double>(load<int64_t>(p, i));
    case DType::u64: return static_cast<double>(load<uint64_t>(p, i));
    case DType::boolean: return load<uint8_t>(p, i) ? 1.0 : 0.0;
    case DType::i4: {
      uint8_t b = p[i / 2];
      int v = (i % 2 == 0) ? (b & 0xf) : (b >> 4);
      return v >= 8 ? v - 16 : v;
    }
    case DType::u4: {
      uint8_t b = p[i / 2];
      return (i % 2 == 0) ? (b & 0xf) : (b >> 4);
    }
  }
  return 0;
}

void Tensor::set_f64(int64_t i, double v) {
  uint8_t* p = bytes();
  switch (dtype_) {
    case DType::f32: store<float>(p, i, static_cast<float>(v)); break;
    case DType::f16: store<uint16_t>(p, i, f32_to_f16(static_cast<float>(v))); break;
    case DType::bf16: store<uint16_t>(p, i, f32_to_bf16(static_cast<float>(v))); break;
    case DType::f64: store<double>(p, i, v); break;
    case DType::c64: store<float>(p, 2 * i, static_cast<float>(v)); break;
    case DType::i8: store<int8_t>(p, i, static_cast<int8_t>(v)); break;
    case DType::u8: store<uint8_t>(p, i, static_cast<uint8_t>(v)); break;
    case DType::i16: store<int16_t>(p, i, static_cast<int16_t>(v)); break;
    case DType::u16: store<uint16_t>(p, i, static_cast<uint16_t>(v)); break;
    case DType::i32: store<int32_t>(p, i, static_cast<int32_t>(v)); break;
    case DType::u32: store<uint32_t>(p, i, static_cast<uint32_t>(v)); break;
    case DType::i64: store<int64_t>(p, i, static_cast<int64_t>(v)); break;
    case DType::u64: store<uint64_t>(p, i, static_cast<uint64_t>(v)); break;
    case DType::boolean: store<uint8_t>(p, i, v != 0 ? 1 : 0); break;
    case DType::i4:
    case DType::u4: {
      uint8_t nib = static_cast<uint8_t>(static_cast<int>(v) & 0xf);
      uint8_t& b = p[i / 2];
      b = (i % 2 == 0) ? static_cast<uint8_t>((b & 0xf0) | nib) : static_cast<uint8_t>((b & 0x0f) | (nib << 4));
      break;
    }
  }
}

double Tensor::get_imag(int64_t i) const {
  return dtype_ == DType::c64 ? load<float>(bytes(), 2 * i + 1) : 0.0;
}
void Tensor::set_imag(int64_t i, double v) {
  if (dtype_ == DType::c64) store<float>(bytes(), 2 * i + 1, static_cast<float>(v));
}

std::vector<double> Tensor::to_f64() const {
  std::vector<double> r(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) r[i] = get_f64(i);
  return r;
}

Tensor Tensor::clone() const {
  Tensor t = zeros(dtype_, sizes_);
  if (nbytes()) std::memcpy(t.bytes(), bytes(), nbytes());
  return t;
}

Expected<Tensor> Tensor::reshaped(Sizes sizes) const {
  if (rlx::numel(sizes) != numel())
    return error(ErrorCode::shape_error, "cannot reshape ", sizes_to_string(sizes_), " to ",
                 sizes_to_string(sizes));
  return Tensor(dtype_, std::move(sizes), storage_, offset_);
}

std::string Tensor::to_string(int64_t max_elems) const {
  std::ostringstream os;
  os << dtype_name(dtype_) << sizes_to_string(sizes_) << " [";
  int64_t n = numel();
  for (int64_t i = 0; i < n && i < max_elems; ++i) {
    if (i) os << ", ";
    os << get_f64(i);
  }
  if (n > max_elems) os << ", ...";
  os << "]";
  return os.str();
}

}  // namespace rlx
