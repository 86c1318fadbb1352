#include "d3d12_runtime.h"

// The D3D12 headers for Linux (Debian's directx-headers-dev, the ones Mesa builds WSL2
// support with): the Windows types come from winadapter.h.
#include <wsl/winadapter.h>
#include <directx/d3d12.h>
#include <dxguids/dxguids.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "codegen/c_renderer.h"
#include "codegen/hlsl_prelude.h"

namespace rlx::directx {
namespace {

// ---- DXC's compiler interface (dxcapi.h is not packaged by Debian): the part rlx calls, in
// the declaration order of DXC's own header, which fixes the vtable layout. libdxcompiler.so
// uses the platform's C++ ABI (no ms_abi), as these declarations do.
struct DxcBuffer {
  const void* Ptr;
  SIZE_T Size;
  UINT Encoding;
};
enum DxcOutKind : UINT { kDxcOutObject = 1, kDxcOutErrors = 2 };
struct IDxcBlob : public IUnknown {
  virtual void* STDMETHODCALLTYPE GetBufferPointer() = 0;
  virtual SIZE_T STDMETHODCALLTYPE GetBufferSize() = 0;
};
struct IDxcResult : public IUnknown {
  virtual HRESULT STDMETHODCALLTYPE GetStatus(HRESULT* status) = 0;
  virtual HRESULT STDMETHODCALLTYPE GetResult(IDxcBlob** result) = 0;
  virtual HRESULT STDMETHODCALLTYPE GetErrorBuffer(IUnknown** errors) = 0;
  virtual BOOL STDMETHODCALLTYPE HasOutput(UINT kind) = 0;
  virtual HRESULT STDMETHODCALLTYPE GetOutput(UINT kind, REFIID iid, void** object, IUnknown** name) = 0;
};
struct IDxcCompiler3 : public IUnknown {
  virtual HRESULT STDMETHODCALLTYPE Compile(const DxcBuffer* source, LPCWSTR* args, UINT32 count, IUnknown* includes,
                                            REFIID iid, void** result) = 0;
};
using DxcCreateInstanceFn = HRESULT (*)(REFCLSID clsid, REFIID iid, void** object);
constexpr GUID kClsidDxcCompiler = {0x73e22d93, 0xe6ce, 0x47f3, {0xb5, 0xbf, 0xf0, 0x66, 0x4f, 0x39, 0xc1, 0xb0}};
constexpr GUID kIidDxcCompiler3 = {0x228b4687, 0x5a6a, 0x4730, {0x90, 0x0c, 0x97, 0x02, 0xb2, 0x20, 0x3f, 0x54}};
constexpr GUID kIidDxcResult = {0x58346cda, 0xdde7, 0x4497, {0x94, 0x61, 0x6f, 0x87, 0xaf, 0x5e, 0x06, 0x59}};
constexpr GUID kIidDxcBlob = {0x8ba5fb08, 0x5195, 0x40e2, {0xac, 0x58, 0x0d, 0x98, 0x9c, 0x3a, 0x01, 0x02}};

using CreateDeviceFn = HRESULT (*)(IUnknown* adapter, D3D_FEATURE_LEVEL level, REFIID iid, void** device);
using SerializeRootSignatureFn = HRESULT (*)(const D3D12_ROOT_SIGNATURE_DESC* desc, D3D_ROOT_SIGNATURE_VERSION version,
                                             ID3DBlob** blob, ID3DBlob** error);

// A COM pointer released when it goes out of scope.
template <class T>
class Com {
 public:
  Com() = default;
  Com(const Com&) = delete;
  Com& operator=(const Com&) = delete;
  Com(Com&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  Com& operator=(Com&& o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~Com() {
    if (p_) p_->Release();
  }
  T* get() const { return p_; }
  T* operator->() const { return p_; }
  T** out() { return &p_; }
  void** out_void() { return reinterpret_cast<void**>(&p_); }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  T* p_ = nullptr;
};

Status hr_check(HRESULT hr, const std::string& what) {
  if (SUCCEEDED(hr)) return Status::ok();
  char code[16];
  std::snprintf(code, sizeof code, "0x%08x", static_cast<unsigned>(hr));
  return error(ErrorCode::runtime_error, "directx: ", what, " failed (HRESULT ", code, ")");
}

// A device buffer: a default-heap resource, always in UNORDERED_ACCESS between commands.
struct D3dBuffer {
  Com<ID3D12Resource> resource;
  uint64_t bytes = 0;
};

// A built kernel: its pipeline and root signature, and how many scalars and buffers it binds.
struct D3dKernel {
  Com<ID3D12RootSignature> root;
  Com<ID3D12PipelineState> pipeline;
  int buffers = 0;
  int scalars = 0;
};

class D3d12Runtime final : public hal::StreamRuntime {
 public:
  D3d12Runtime() : hal::StreamRuntime("directx") {}
  ~D3d12Runtime() override {
    for (auto& [key, k] : kernels_) delete k;
  }

  Status open();
  const std::string& description() const { return description_; }

  RLX_HAL_RUNTIME_METHODS;
  Status check_dispatch(const hal::Dispatch& d) const override {
    uint32_t g[3];
    return groups(d, g);
  }

 protected:
  RLX_HAL_STREAM_METHODS;

 private:
  Status groups(const hal::Dispatch& d, uint32_t out[3]) const;
  Expected<std::vector<uint8_t>> compile(const std::string& hlsl);
  Expected<Com<ID3D12Resource>> resource(uint64_t bytes, D3D12_HEAP_TYPE heap, D3D12_RESOURCE_STATES state,
                                         const std::string& what);
  void transition(ID3D12Resource* r, D3D12_RESOURCE_STATES from, D3D12_RESOURCE_STATES to);
  Status begin();  // opens the command list if it is closed
  ID3D12Resource* res(const hal::BufferRange& r) const { return reinterpret_cast<D3dBuffer*>(r.buffer.id)->resource.get(); }

  void* d3d12_lib_ = nullptr;
  void* dxc_lib_ = nullptr;
  SerializeRootSignatureFn serialize_ = nullptr;
  DxcCreateInstanceFn dxc_create_ = nullptr;
  Com<ID3D12Device> device_;
  Com<ID3D12CommandQueue> queue_;
  Com<ID3D12CommandAllocator> allocator_;
  Com<ID3D12GraphicsCommandList> list_;
  Com<ID3D12Fence> fence_;
  uint64_t fence_value_ = 0;
  bool open_ = false;  // the command list is recording
  // staging of the commands recorded since the last finish, and the host reads they feed
  std::vector<Com<ID3D12Resource>> staging_;
  struct PendingRead {
    ID3D12Resource* readback;
    void* host;
    uint64_t bytes;
  };
  std::vector<PendingRead> reads_;
  std::mutex mu_;  // kernels_
  std::map<std::string, D3dKernel*> kernels_;
  std::string description_;
};

Status D3d12Runtime::open() {
  d3d12_lib_ = dlopen("libd3d12.so", RTLD_NOW | RTLD_LOCAL);
  if (!d3d12_lib_)
    return error(ErrorCode::unavailable, "no D3D12 here: libd3d12.so does not load (D3D12 reaches Linux only under WSL2, "
                 "in /usr/lib/wsl/lib)");
  auto create = reinterpret_cast<CreateDeviceFn>(dlsym(d3d12_lib_, "D3D12CreateDevice"));
  serialize_ = reinterpret_cast<SerializeRootSignatureFn>(dlsym(d3d12_lib_, "D3D12SerializeRootSignature"));
  if (!create || !serialize_) return error(ErrorCode::unavailable, "libd3d12.so lacks D3D12CreateDevice or D3D12SerializeRootSignature");
  dxc_lib_ = dlopen("libdxcompiler.so", RTLD_NOW | RTLD_LOCAL);
  if (!dxc_lib_)
    return error(ErrorCode::unavailable, "D3D12 is here but DXC is not: libdxcompiler.so does not load (Microsoft's "
                 "DirectXShaderCompiler releases ship it for Linux)");
  dxc_create_ = reinterpret_cast<DxcCreateInstanceFn>(dlsym(dxc_lib_, "DxcCreateInstance"));
  if (!dxc_create_) return error(ErrorCode::unavailable, "libdxcompiler.so lacks DxcCreateInstance");
  RLX_TRY(hr_check(create(nullptr, D3D_FEATURE_LEVEL_11_0, __uuidof(ID3D12Device), device_.out_void()), "D3D12CreateDevice"));
  D3D12_COMMAND_QUEUE_DESC qd{};
  qd.Type = D3D12_COMMAND_LIST_TYPE_COMPUTE;
  RLX_TRY(hr_check(device_->CreateCommandQueue(&qd, __uuidof(ID3D12CommandQueue), queue_.out_void()), "CreateCommandQueue"));
  RLX_TRY(hr_check(device_->CreateCommandAllocator(D3D12_COMMAND_LIST_TYPE_COMPUTE, __uuidof(ID3D12CommandAllocator),
                                                   allocator_.out_void()),
                   "CreateCommandAllocator"));
  RLX_TRY(hr_check(device_->CreateCommandList(0, D3D12_COMMAND_LIST_TYPE_COMPUTE, allocator_.get(), nullptr,
                                              __uuidof(ID3D12GraphicsCommandList), list_.out_void()),
                   "CreateCommandList"));
  RLX_TRY(hr_check(list_->Close(), "closing the first command list"));
  RLX_TRY(hr_check(device_->CreateFence(0, D3D12_FENCE_FLAG_NONE, __uuidof(ID3D12Fence), fence_.out_void()), "CreateFence"));
  // a root signature holds 64 DWORDs: two root constants per 64-bit scalar (a generated kernel
  // has two), two per root UAV
  limits_.max_bindings = 30;
  LUID luid = device_->GetAdapterLuid();
  description_ = cat("D3D12 device (adapter LUID ", luid.HighPart, ":", luid.LowPart,
                     "), DXC, 32-bit sizes, native tiled GEMM, generated HLSL; never run in rlx's tests");
  return Status::ok();
}

Expected<std::vector<uint8_t>> D3d12Runtime::compile(const std::string& hlsl) {
  Com<IDxcCompiler3> dxc;
  RLX_TRY(hr_check(dxc_create_(kClsidDxcCompiler, kIidDxcCompiler3, dxc.out_void()), "DxcCreateInstance"));
  DxcBuffer src{hlsl.data(), hlsl.size(), 65001 /* UTF-8 */};
  LPCWSTR args[] = {L"-T", L"cs_6_0", L"-E", L"main", L"-O3"};
  Com<IDxcResult> result;
  RLX_TRY(hr_check(dxc->Compile(&src, args, 5, nullptr, kIidDxcResult, result.out_void()), "DXC Compile"));
  HRESULT status = S_OK;
  RLX_TRY(hr_check(result->GetStatus(&status), "DXC GetStatus"));
  if (FAILED(status)) {
    std::string log;
    Com<IDxcBlob> errors;
    if (SUCCEEDED(result->GetOutput(kDxcOutErrors, kIidDxcBlob, errors.out_void(), nullptr)) && errors)
      log.assign(static_cast<const char*>(errors->GetBufferPointer()), errors->GetBufferSize());
    if (log.size() > 3000) log = log.substr(0, 3000) + "\n...";
    return error(ErrorCode::runtime_error, "directx: DXC failed to compile the generated HLSL:\n", log);
  }
  Com<IDxcBlob> object;
  RLX_TRY(hr_check(result->GetOutput(kDxcOutObject, kIidDxcBlob, object.out_void(), nullptr), "DXC GetOutput(object)"));
  const auto* p = static_cast<const uint8_t*>(object->GetBufferPointer());
  return std::vector<uint8_t>(p, p + object->GetBufferSize());
}

Expected<Com<ID3D12Resource>> D3d12Runtime::resource(uint64_t bytes, D3D12_HEAP_TYPE heap, D3D12_RESOURCE_STATES state,
                                                     const std::string& what) {
  D3D12_HEAP_PROPERTIES hp{};
  hp.Type = heap;
  D3D12_RESOURCE_DESC rd{};
  rd.Dimension = D3D12_RESOURCE_DIMENSION_BUFFER;
  rd.Width = std::max<uint64_t>(bytes, 4);
  rd.Height = 1;
  rd.DepthOrArraySize = 1;
  rd.MipLevels = 1;
  rd.Format = DXGI_FORMAT_UNKNOWN;
  rd.SampleDesc.Count = 1;
  rd.Layout = D3D12_TEXTURE_LAYOUT_ROW_MAJOR;
  rd.Flags = heap == D3D12_HEAP_TYPE_DEFAULT ? D3D12_RESOURCE_FLAG_ALLOW_UNORDERED_ACCESS : D3D12_RESOURCE_FLAG_NONE;
  Com<ID3D12Resource> r;
  RLX_TRY(hr_check(device_->CreateCommittedResource(&hp, D3D12_HEAP_FLAG_NONE, &rd, state, nullptr, __uuidof(ID3D12Resource),
                                                    r.out_void()),
                   cat("allocating ", bytes, " bytes for ", what)));
  return r;
}

void D3d12Runtime::transition(ID3D12Resource* r, D3D12_RESOURCE_STATES from, D3D12_RESOURCE_STATES to) {
  D3D12_RESOURCE_BARRIER b{};
  b.Type = D3D12_RESOURCE_BARRIER_TYPE_TRANSITION;
  b.Transition.pResource = r;
  b.Transition.Subresource = D3D12_RESOURCE_BARRIER_ALL_SUBRESOURCES;
  b.Transition.StateBefore = from;
  b.Transition.StateAfter = to;
  list_->ResourceBarrier(1, &b);
}

Status D3d12Runtime::begin() {
  if (open_) return Status::ok();
  RLX_TRY(hr_check(allocator_->Reset(), "resetting the command allocator"));
  RLX_TRY(hr_check(list_->Reset(allocator_.get(), nullptr), "resetting the command list"));
  open_ = true;
  return Status::ok();
}

Expected<hal::Buffer> D3d12Runtime::allocate(uint64_t bytes, const std::string& what) {
  auto b = std::make_unique<D3dBuffer>();
  RLX_ASSIGN_OR_RETURN(b->resource, resource(bytes, D3D12_HEAP_TYPE_DEFAULT, D3D12_RESOURCE_STATE_COMMON, what));
  b->bytes = bytes;
  RLX_TRY(begin());
  transition(b->resource.get(), D3D12_RESOURCE_STATE_COMMON, D3D12_RESOURCE_STATE_UNORDERED_ACCESS);
  RLX_TRY(finish());
  return hal::Buffer{reinterpret_cast<uint64_t>(b.release()), bytes};
}

void D3d12Runtime::release(hal::Buffer b) { delete reinterpret_cast<D3dBuffer*>(b.id); }

Status D3d12Runtime::upload(const hal::BufferRange& range, const void* data, uint64_t bytes) {
  RLX_TRY(write(range, data, bytes));
  return finish();
}

Status D3d12Runtime::download(const hal::BufferRange& range, void* data, uint64_t bytes) {
  RLX_TRY(read(range, data, bytes));
  return finish();
}

Status D3d12Runtime::write(const hal::BufferRange& range, const void* data, uint64_t bytes) {
  if (bytes == 0) return Status::ok();
  RLX_ASSIGN_OR_RETURN(Com<ID3D12Resource> up, resource(bytes, D3D12_HEAP_TYPE_UPLOAD, D3D12_RESOURCE_STATE_GENERIC_READ,
                                                        "an upload"));
  void* p = nullptr;
  RLX_TRY(hr_check(up->Map(0, nullptr, &p), "mapping an upload buffer"));
  if (data) std::memcpy(p, data, bytes);
  else std::memset(p, 0, bytes);
  up->Unmap(0, nullptr);
  RLX_TRY(begin());
  transition(res(range), D3D12_RESOURCE_STATE_UNORDERED_ACCESS, D3D12_RESOURCE_STATE_COPY_DEST);
  list_->CopyBufferRegion(res(range), range.offset, up.get(), 0, bytes);
  transition(res(range), D3D12_RESOURCE_STATE_COPY_DEST, D3D12_RESOURCE_STATE_UNORDERED_ACCESS);
  staging_.push_back(std::move(up));
  return Status::ok();
}

Status D3d12Runtime::read(const hal::BufferRange& range, void* data, uint64_t bytes) {
  if (bytes == 0) return Status::ok();
  RLX_ASSIGN_OR_RETURN(Com<ID3D12Resource> back, resource(bytes, D3D12_HEAP_TYPE_READBACK, D3D12_RESOURCE_STATE_COPY_DEST,
                                                          "a read-back"));
  RLX_TRY(begin());
  transition(res(range), D3D12_RESOURCE_STATE_UNORDERED_ACCESS, D3D12_RESOURCE_STATE_COPY_SOURCE);
  list_->CopyBufferRegion(back.get(), 0, res(range), range.offset, bytes);
  transition(res(range), D3D12_RESOURCE_STATE_COPY_SOURCE, D3D12_RESOURCE_STATE_UNORDERED_ACCESS);
  reads_.push_back({back.get(), data, bytes});
  staging_.push_back(std::move(back));
  return Status::ok();
}

Status D3d12Runtime::groups(const hal::Dispatch& d, uint32_t out[3]) const {
  if (d.items > INT32_MAX)
    return error(ErrorCode::unsupported, "directx: kernel ", d.name, " runs ", d.items, " work items, more than 2^31-1");
  for (int64_t v : d.scalars)
    if (v < INT32_MIN || v > INT32_MAX)
      return error(ErrorCode::unsupported, "directx: kernel ", d.name, " takes the size ", v, ", past the 32 bits HLSL kernels index in");
  const uint32_t max[3] = {codegen::kHlslMaxGroupsX, D3D12_CS_DISPATCH_MAX_THREAD_GROUPS_PER_DIMENSION,
                           D3D12_CS_DISPATCH_MAX_THREAD_GROUPS_PER_DIMENSION};
  return hal::dispatch_groups(d, codegen::kGlslWorkgroupSize, max, "directx", out);
}

Status D3d12Runtime::enqueue(const hal::Command& c) {
  if (c.kind == hal::Command::Kind::zero) return write(c.range, nullptr, c.range.bytes);
  if (c.kind != hal::Command::Kind::dispatch)
    return error(ErrorCode::unsupported, "directx: ", c.name, " is a library call; the D3D12 runtime records commands only");
  const hal::Dispatch& d = c.dispatch;
  const D3dKernel* k = reinterpret_cast<const D3dKernel*>(d.kernel.id);
  if (static_cast<int>(d.buffers.size()) != k->buffers || static_cast<int>(d.scalars.size()) != k->scalars)
    return error(ErrorCode::internal, "directx: ", d.name, " binds ", d.buffers.size(), " buffers and ", d.scalars.size(),
                 " scalars; its kernel takes ", k->buffers, " and ", k->scalars);
  uint32_t g[3];
  RLX_TRY(groups(d, g));
  RLX_TRY(begin());
  list_->SetComputeRootSignature(k->root.get());
  list_->SetPipelineState(k->pipeline.get());
  UINT param = 0;
  if (k->scalars) list_->SetComputeRoot32BitConstants(param++, static_cast<UINT>(d.scalars.size() * 2), d.scalars.data(), 0);
  for (const hal::BufferRange& r : d.buffers)
    list_->SetComputeRootUnorderedAccessView(param++, res(r)->GetGPUVirtualAddress() + r.offset);
  list_->Dispatch(g[0], g[1], g[2]);
  D3D12_RESOURCE_BARRIER uav{};
  uav.Type = D3D12_RESOURCE_BARRIER_TYPE_UAV;
  uav.UAV.pResource = nullptr;  // every UAV access before, before every one after
  list_->ResourceBarrier(1, &uav);
  return Status::ok();
}

Status D3d12Runtime::finish() {
  if (!open_) return Status::ok();
  open_ = false;
  RLX_TRY(hr_check(list_->Close(), "closing the command list"));
  ID3D12CommandList* lists[] = {list_.get()};
  queue_->ExecuteCommandLists(1, lists);
  RLX_TRY(hr_check(queue_->Signal(fence_.get(), ++fence_value_), "signalling the fence"));
  // a null event blocks until the fence reaches the value
  RLX_TRY(hr_check(fence_->SetEventOnCompletion(fence_value_, nullptr), "waiting for the GPU"));
  Status st = Status::ok();
  for (const PendingRead& r : reads_) {
    void* p = nullptr;
    D3D12_RANGE range{0, static_cast<SIZE_T>(r.bytes)};
    if (FAILED(r.readback->Map(0, &range, &p))) {
      st = error(ErrorCode::runtime_error, "directx: mapping a read-back buffer failed");
      continue;
    }
    std::memcpy(r.host, p, r.bytes);
    D3D12_RANGE none{0, 0};
    r.readback->Unmap(0, &none);
  }
  reads_.clear();
  staging_.clear();
  return st;
}

Expected<std::vector<hal::Kernel>> D3d12Runtime::build(const hal::KernelModule& module) {
  std::vector<hal::Kernel> out;
  for (const hal::KernelEntry& e : module.entries) {
    const std::string key = cat(e.buffers, ":", e.scalars.size(), ":", module.source);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = kernels_.find(key); it != kernels_.end()) {
        out.push_back({reinterpret_cast<uint64_t>(it->second)});
        continue;
      }
    }
    // root signature: the scalars as 32-bit root constants at b0, then a root UAV per buffer
    std::vector<D3D12_ROOT_PARAMETER> params;
    if (!e.scalars.empty()) {
      D3D12_ROOT_PARAMETER p{};
      p.ParameterType = D3D12_ROOT_PARAMETER_TYPE_32BIT_CONSTANTS;
      p.Constants.ShaderRegister = 0;
      p.Constants.Num32BitValues = static_cast<UINT>(e.scalars.size() * 2);
      p.ShaderVisibility = D3D12_SHADER_VISIBILITY_ALL;
      params.push_back(p);
    }
    for (int b = 0; b < e.buffers; ++b) {
      D3D12_ROOT_PARAMETER p{};
      p.ParameterType = D3D12_ROOT_PARAMETER_TYPE_UAV;
      p.Descriptor.ShaderRegister = static_cast<UINT>(b);
      p.ShaderVisibility = D3D12_SHADER_VISIBILITY_ALL;
      params.push_back(p);
    }
    // a root signature holds 64 DWORDs: constants take one each, root UAVs two
    const size_t dwords = e.scalars.size() * 2 + static_cast<size_t>(e.buffers) * 2;
    if (dwords > 64)
      return error(ErrorCode::unsupported, "directx: kernel ", e.name, " binds ", e.buffers, " buffers and ", e.scalars.size(),
                   " scalars, more than a D3D12 root signature holds (64 DWORDs)");
    D3D12_ROOT_SIGNATURE_DESC rs{};
    rs.NumParameters = static_cast<UINT>(params.size());
    rs.pParameters = params.data();
    Com<ID3DBlob> blob, log;
    if (FAILED(serialize_(&rs, D3D_ROOT_SIGNATURE_VERSION_1, blob.out(), log.out()))) {
      std::string why = log ? std::string(static_cast<const char*>(log->GetBufferPointer()), log->GetBufferSize()) : "";
      return error(ErrorCode::runtime_error, "directx: serializing the root signature of ", e.name, " failed: ", why);
    }
    auto k = std::make_unique<D3dKernel>();
    k->buffers = e.buffers;
    k->scalars = static_cast<int>(e.scalars.size());
    RLX_TRY(hr_check(device_->CreateRootSignature(0, blob->GetBufferPointer(), blob->GetBufferSize(), __uuidof(ID3D12RootSignature),
                                                  k->root.out_void()),
                     "CreateRootSignature"));
    RLX_ASSIGN_OR_RETURN(std::vector<uint8_t> dxil, compile(module.source));
    D3D12_COMPUTE_PIPELINE_STATE_DESC pd{};
    pd.pRootSignature = k->root.get();
    pd.CS = {dxil.data(), dxil.size()};
    RLX_TRY(hr_check(device_->CreateComputePipelineState(&pd, __uuidof(ID3D12PipelineState), k->pipeline.out_void()),
                     cat("CreateComputePipelineState (", e.name, ")")));
    std::lock_guard<std::mutex> lock(mu_);
    D3dKernel*& slot = kernels_[key];
    if (!slot) slot = k.release();
    out.push_back({reinterpret_cast<uint64_t>(slot)});
  }
  return out;
}

}  // namespace

Expected<std::shared_ptr<hal::Runtime>> create_d3d12_runtime() {
  auto rt = std::make_shared<D3d12Runtime>();
  RLX_TRY(rt->open());
  return std::shared_ptr<hal::Runtime>(rt);
}

std::string d3d12_description(const hal::Runtime& rt) { return static_cast<const D3d12Runtime&>(rt).description(); }

}  // namespace rlx::directx
