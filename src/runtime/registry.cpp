// The device registry: one line per device. A device that cannot run here (no hardware, no
// driver) is still listed, with the reason.
#include <functional>
#include <map>
#include <mutex>

#include "backends/cpu/cpu_device.h"
#include "backends/directx/directx_device.h"
#include "backends/metal/metal_device.h"
#include "backends/oneapi/oneapi_device.h"
#include "backends/null/null_device.h"
#ifdef RLX_HAVE_OPENCL
#include "backends/opencl/opencl_device.h"
#endif
#ifdef RLX_HAVE_CUDA
#include "backends/cuda/cuda_device.h"
#endif
#include "backends/ref/ref_device.h"
#ifdef RLX_HAVE_VULKAN
#include "backends/vulkan/vulkan_device.h"
#endif
#ifdef RLX_HAVE_OPENGL
#include "backends/opengl/opengl_device.h"
#endif
#ifdef RLX_HAVE_HIP
#include "backends/rocm/rocm_device.h"
#endif
#include "backends/webgpu/webgpu_device.h"
#include "rlx/device.h"

namespace rlx {
namespace {

struct Entry {
  const char* name;
  std::function<std::shared_ptr<const Device>()> make;
};

std::shared_ptr<const Device> make_opencl() {
#ifdef RLX_HAVE_OPENCL
  return opencl::make_opencl_device();
#else
  return null_device::make_unavailable_device("opencl", "rlx was built without OpenCL (install ocl-icd-opencl-dev and opencl-headers, then rebuild)");
#endif
}

std::shared_ptr<const Device> make_cuda() {
#ifdef RLX_HAVE_CUDA
  return cuda::make_cuda_device();
#else
  return null_device::make_unavailable_device("cuda", "rlx was built without the CUDA toolkit (install it, e.g. in /usr/local/cuda, then rebuild)");
#endif
}

std::shared_ptr<const Device> make_rocm() {
#ifdef RLX_HAVE_HIP
  return rocm::make_rocm_device();
#else
  return null_device::make_unavailable_device("rocm", "rlx was built without the HIP headers (install libamdhip64-dev, then rebuild)");
#endif
}

std::shared_ptr<const Device> make_vulkan() {
#ifdef RLX_HAVE_VULKAN
  return vulkan::make_vulkan_device();
#else
  return null_device::make_unavailable_device("vulkan", "rlx was built without Vulkan (install libvulkan-dev and libshaderc-dev, then rebuild)");
#endif
}

std::shared_ptr<const Device> make_opengl() {
#ifdef RLX_HAVE_OPENGL
  return opengl::make_opengl_device();
#else
  return null_device::make_unavailable_device("opengl", "rlx was built without EGL and OpenGL headers (install libegl-dev and libgl-dev, then rebuild)");
#endif
}

const std::vector<Entry>& entries() {
  static const std::vector<Entry> e = {
      {"cpu", cpu::make_cpu_device},
      {"ref", ref::make_ref_device},
      {"oneapi", oneapi::make_oneapi_device},
      {"opencl", make_opencl},
      {"vulkan", make_vulkan},
      {"opengl", make_opengl},
      {"webgpu", webgpu::make_webgpu_device},
      {"directx", directx::make_directx_device},
      {"metal", metal::make_metal_device},
      {"cuda", make_cuda},
      {"rocm", make_rocm},
      {"null", null_device::make_null_device},
  };
  return e;
}

std::shared_ptr<const Device> instance(const Entry& e) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const Device>> made;
  std::lock_guard<std::mutex> lock(mu);
  auto& d = made[e.name];
  if (!d) d = e.make();
  return d;
}

}  // namespace

std::string_view device_kind_name(DeviceKind k) {
  switch (k) {
    case DeviceKind::host: return "host";
    case DeviceKind::reference: return "reference";
    case DeviceKind::gpu: return "gpu";
    case DeviceKind::skeleton: return "skeleton";
  }
  return "?";
}

std::vector<std::string> device_names() {
  std::vector<std::string> r;
  for (const Entry& e : entries()) r.push_back(e.name);
  return r;
}

std::vector<DeviceInfo> list_devices() {
  std::vector<DeviceInfo> r;
  for (const Entry& e : entries()) r.push_back(instance(e)->info());
  return r;
}

Expected<std::shared_ptr<const Device>> get_device(const std::string& name) {
  std::string known;
  for (const Entry& e : entries()) {
    if (name == e.name) {
      auto d = instance(e);
      if (!d->info().available)
        return error(ErrorCode::unavailable, "device ", name, " is not available: ", d->info().reason);
      return d;
    }
    known += (known.empty() ? "" : ", ") + std::string(e.name);
  }
  return error(ErrorCode::invalid_argument, "unknown device '", name, "' (known: ", known, ")");
}

std::string default_device_name() { return "cpu"; }

}  // namespace rlx
