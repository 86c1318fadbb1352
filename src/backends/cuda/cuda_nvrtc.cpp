#include "cuda_nvrtc.h"

#include <nvrtc.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <unistd.h>

#include "codegen/c_jit.h"

namespace rlx::cuda {
namespace {

Status nvrtc_check(nvrtcResult r, const char* what) {
  if (r == NVRTC_SUCCESS) return Status::ok();
  return error(ErrorCode::runtime_error, "cuda: ", what, " failed: ", nvrtcGetErrorString(r), " (", static_cast<int>(r), ")");
}

struct Program {
  nvrtcProgram p = nullptr;
  ~Program() {
    if (p) nvrtcDestroyProgram(&p);
  }
};

std::mutex g_mu;
std::map<std::string, std::shared_ptr<const NvrtcImage>> g_images;

}  // namespace

std::vector<std::string> nvrtc_options() { return {"-default-device", "-std=c++17", "-w"}; }

std::string nvrtc_version() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "unknown";
  return cat(major, ".", minor);
}

std::vector<int> nvrtc_supported_archs() {
  int n = 0;
  if (nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0) return {};
  std::vector<int> a(static_cast<size_t>(n));
  if (nvrtcGetSupportedArchs(a.data()) != NVRTC_SUCCESS) return {};
  return a;
}

Expected<std::shared_ptr<const NvrtcImage>> nvrtc_compile(const std::string& source, const std::string& arch) {
  const bool ptx = arch.rfind("compute_", 0) == 0;
  if (!ptx && arch.rfind("sm_", 0) != 0)
    return error(ErrorCode::invalid_argument, "cuda: NVRTC target '", arch, "' is neither sm_XY nor compute_XY");
  std::vector<std::string> opts = nvrtc_options();
  opts.push_back("-arch=" + arch);
  std::string flat;
  for (const std::string& o : opts) flat += o + " ";
  const std::string key = codegen::hex_key(source + "\n//nvrtc " + nvrtc_version() + " " + flat);
  std::lock_guard<std::mutex> lock(g_mu);
  if (auto it = g_images.find(key); it != g_images.end()) return it->second;
  const std::string dir = codegen::kernel_cache_dir() + "/cuda";
  const std::string path = dir + "/" + key + "." + arch + (ptx ? ".ptx" : ".cubin");
  auto img = std::make_shared<NvrtcImage>();
  img->ptx = ptx;
  {
    std::ifstream f(path, std::ios::binary);
    if (f) {
      img->bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
      if (!img->bytes.empty()) {
        img->from_cache = true;
        g_images[key] = img;
        return std::shared_ptr<const NvrtcImage>(img);
      }
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  Program prog;
  RLX_TRY(nvrtc_check(nvrtcCreateProgram(&prog.p, source.c_str(), "rlx_kernels.cu", 0, nullptr, nullptr),
                      "nvrtcCreateProgram"));
  std::vector<const char*> argv;
  for (const std::string& o : opts) argv.push_back(o.c_str());
  const nvrtcResult rc = nvrtcCompileProgram(prog.p, static_cast<int>(argv.size()), argv.data());
  if (rc != NVRTC_SUCCESS) {
    size_t n = 0;
    std::string log;
    if (nvrtcGetProgramLogSize(prog.p, &n) == NVRTC_SUCCESS && n > 1) {
      log.resize(n);
      nvrtcGetProgramLog(prog.p, log.data());
      while (!log.empty() && log.back() == '\0') log.pop_back();
    }
    if (log.size() > 4000) log = log.substr(0, 4000) + "\n...";
    return error(ErrorCode::runtime_error, "cuda: nvrtcCompileProgram for ", arch, " failed: ", nvrtcGetErrorString(rc),
                 "\n", log);
  }
  size_t n = 0;
  if (ptx) {
    RLX_TRY(nvrtc_check(nvrtcGetPTXSize(prog.p, &n), "nvrtcGetPTXSize"));
    img->bytes.resize(n);
    RLX_TRY(nvrtc_check(nvrtcGetPTX(prog.p, img->bytes.data()), "nvrtcGetPTX"));
  } else {
    RLX_TRY(nvrtc_check(nvrtcGetCUBINSize(prog.p, &n), "nvrtcGetCUBINSize"));
    img->bytes.resize(n);
    RLX_TRY(nvrtc_check(nvrtcGetCUBIN(prog.p, img->bytes.data()), "nvrtcGetCUBIN"));
  }
  img->compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Written under a private name and renamed, so a concurrent process never reads half a
  // file. A cache that cannot be written only costs the next process a compile.
  if (codegen::make_dirs(dir).ok()) {
    const std::string tmp = path + "." + std::to_string(getpid()) + ".tmp";
    std::ofstream f(tmp, std::ios::binary);
    f.write(img->bytes.data(), static_cast<std::streamsize>(img->bytes.size()));
    f.close();
    if (f) std::rename(tmp.c_str(), path.c_str());
    else std::remove(tmp.c_str());
  }
  g_images[key] = img;
  return std::shared_ptr<const NvrtcImage>(img);
}

}  // namespace rlx::cuda
