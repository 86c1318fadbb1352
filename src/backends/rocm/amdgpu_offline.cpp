#include "amdgpu_offline.h"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

namespace rlx::rocm {
namespace {

#ifdef RLX_HIP_CLANG
constexpr const char* kClang = RLX_HIP_CLANG;
constexpr const char* kReadelf = RLX_HIP_READELF;
constexpr const char* kRocmPath = RLX_HIP_ROCM_PATH;
constexpr const char* kDeviceLibs = RLX_HIP_DEVICE_LIBS;
#endif

// Runs `cmd` under sh, returning its exit status and what it printed (stdout and stderr).
std::pair<int, std::string> run(const std::string& cmd) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return {-1, "popen failed"};
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

// The kernels' resources from `llvm-readelf --notes` (the metadata note printed as YAML).
std::vector<AmdgpuKernelResources> parse_resources(const std::string& notes) {
  std::vector<AmdgpuKernelResources> ks;
  static const std::regex field(R"(^\s*(-\s+)?\.([a-z_]+):\s+(\S+)\s*$)");
  std::istringstream in(notes);
  std::string line;
  bool in_kernels = false;
  while (std::getline(in, line)) {
    if (line.find("amdhsa.kernels:") != std::string::npos) in_kernels = true;
    else if (line.find("amdhsa.") != std::string::npos) in_kernels = false;
    if (!in_kernels) continue;
    // a new kernel's map starts with "  - ." (its first key, which may open a list); its
    // args' maps are deeper
    const size_t indent = line.find_first_not_of(' ');
    if (indent == 2 && line.compare(2, 3, "- .") == 0) ks.emplace_back();
    std::smatch m;
    if (ks.empty() || indent > 4 || !std::regex_match(line, m, field)) continue;
    const std::string key = m[2], value = m[3];
    AmdgpuKernelResources& k = ks.back();
    auto num = [&] { return std::stoll(value); };
    if (key == "name") k.name = value;
    else if (key == "vgpr_count") k.vgpr_count = static_cast<int>(num());
    else if (key == "sgpr_count") k.sgpr_count = static_cast<int>(num());
    else if (key == "agpr_count") k.agpr_count = static_cast<int>(num());
    else if (key == "vgpr_spill_count") k.vgpr_spill_count = static_cast<int>(num());
    else if (key == "sgpr_spill_count") k.sgpr_spill_count = static_cast<int>(num());
    else if (key == "group_segment_fixed_size") k.lds_bytes = num();
    else if (key == "private_segment_fixed_size") k.scratch_bytes = num();
    else if (key == "wavefront_size") k.wavefront_size = static_cast<int>(num());
  }
  return ks;
}

}  // namespace

Status amdgpu_offline_available() {
#ifdef RLX_HIP_CLANG
  return Status::ok();
#else
  return error(ErrorCode::unavailable,
               "rocm: rlx was configured without a clang for AMD GPUs, the HIP headers or the ROCm device libraries "
               "(scripts/install-deps.sh installs clang-19, libamdhip64-dev and rocm-device-libs; then reconfigure)");
#endif
}

Expected<AmdgpuCodeObject> compile_amdgpu_offline(const std::string& source, const std::string& gfx) {
  RLX_TRY(amdgpu_offline_available());
#ifdef RLX_HIP_CLANG
  static const std::regex arch(R"(gfx[0-9a-f]{3,4})");
  if (!std::regex_match(gfx, arch)) return error(ErrorCode::invalid_argument, "rocm: '", gfx, "' is no gfx target name");
  // a folder per compile (the check compiles on several threads), removed afterwards
  static std::atomic<int> counter{0};
  std::error_code ec;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path(ec) / cat("rlx-amdgpu-", getpid(), "-", counter++);
  std::filesystem::create_directories(dir, ec);
  if (ec) return error(ErrorCode::io_error, "rocm: cannot make ", dir.string(), ": ", ec.message());
  struct Cleanup {
    std::filesystem::path dir;
    ~Cleanup() {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
  } cleanup{dir};
  const std::string stem = (dir / "unit").string();
  {
    std::ofstream f(stem + ".hip", std::ios::binary);
    f << source;
    if (!f) return error(ErrorCode::io_error, "rocm: cannot write ", stem, ".hip");
  }
  const std::string cmd = cat(quoted(kClang), " -x hip --cuda-device-only --no-gpu-bundle-output --offload-arch=", gfx,
                              " -O3 -std=c++17 -w --rocm-path=", quoted(kRocmPath), " --rocm-device-lib-path=",
                              quoted(kDeviceLibs), " -c ", quoted(stem + ".hip"), " -o ", quoted(stem + ".co"));
  auto [rc, log] = run(cmd);
  if (rc != 0) {
    if (log.size() > 4000) log = log.substr(0, 4000) + "\n...";
    return error(ErrorCode::runtime_error, "rocm: clang for ", gfx, " failed (exit ", rc, "):\n", log);
  }
  AmdgpuCodeObject co;
  {
    std::ifstream f(stem + ".co", std::ios::binary);
    co.bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  if (co.bytes.size() < 64) return error(ErrorCode::runtime_error, "rocm: clang for ", gfx, " wrote no code object");
  auto [nrc, notes] = run(cat(quoted(kReadelf), " --notes ", quoted(stem + ".co")));
  if (nrc != 0) return error(ErrorCode::runtime_error, "rocm: llvm-readelf --notes failed on the ", gfx, " code object:\n", notes);
  co.kernels = parse_resources(notes);
  return co;
#else
  return error(ErrorCode::internal, "unreachable");
#endif
}

}  // namespace rlx::rocm
