#include "null_runtime.h"

#include <cstring>
#include <new>

namespace rlx::null_device {
namespace {
uint8_t* host(const hal::BufferRange& r) { return reinterpret_cast<uint8_t*>(r.buffer.id) + r.offset; }
}  // namespace

Expected<hal::Buffer> NullRuntime::allocate(uint64_t bytes, const std::string& what) {
  auto* p = new (std::nothrow) uint8_t[bytes];
  if (!p) return error(ErrorCode::runtime_error, "null: allocating ", bytes, " bytes for ", what);
  return hal::Buffer{reinterpret_cast<uint64_t>(p), bytes};
}

void NullRuntime::release(hal::Buffer b) { delete[] reinterpret_cast<uint8_t*>(b.id); }

Status NullRuntime::upload(const hal::BufferRange& r, const void* data, uint64_t bytes) { return write(r, data, bytes); }

Status NullRuntime::download(const hal::BufferRange& r, void* data, uint64_t bytes) { return read(r, data, bytes); }

Expected<std::vector<hal::Kernel>> NullRuntime::build(const hal::KernelModule& module) {
  return error(ErrorCode::unsupported, "null has no kernel compiler (",
               module.entries.empty() ? std::string("an empty module") : module.entries[0].name,
               "): this is where a device builds its dialect's source");
}

Status NullRuntime::write(const hal::BufferRange& r, const void* data, uint64_t bytes) {
  if (bytes) std::memcpy(host(r), data, bytes);
  return Status::ok();
}

Status NullRuntime::read(const hal::BufferRange& r, void* data, uint64_t bytes) {
  if (bytes) std::memcpy(data, host(r), bytes);
  return Status::ok();
}

Status NullRuntime::enqueue(const hal::Command& c) {
  if (c.kind == hal::Command::Kind::zero) {
    std::memset(host(c.range), 0, c.range.bytes);
    return Status::ok();
  }
  return error(ErrorCode::unsupported, "null cannot launch ", c.dispatch.name, ": it builds no kernels");
}

}  // namespace rlx::null_device
