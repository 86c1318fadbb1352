#include "opengl_runtime.h"

#include <EGL/eglext.h>

#include <algorithm>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "codegen/c_jit.h"
#include "codegen/c_renderer.h"

namespace rlx::opengl {
namespace {

std::string egl_error_name(EGLint e) {
  switch (e) {
    case EGL_SUCCESS: return "EGL_SUCCESS";
    case EGL_NOT_INITIALIZED: return "EGL_NOT_INITIALIZED";
    case EGL_BAD_ACCESS: return "EGL_BAD_ACCESS";
    case EGL_BAD_ALLOC: return "EGL_BAD_ALLOC";
    case EGL_BAD_ATTRIBUTE: return "EGL_BAD_ATTRIBUTE";
    case EGL_BAD_CONFIG: return "EGL_BAD_CONFIG";
    case EGL_BAD_CONTEXT: return "EGL_BAD_CONTEXT";
    case EGL_BAD_DISPLAY: return "EGL_BAD_DISPLAY";
    case EGL_BAD_MATCH: return "EGL_BAD_MATCH";
    case EGL_BAD_PARAMETER: return "EGL_BAD_PARAMETER";
    default: return cat("EGL error 0x", std::hex, e);
  }
}

std::string gl_error_name(GLenum e) {
  const char* n = "GL error";
  switch (e) {
    case GL_INVALID_ENUM: n = "GL_INVALID_ENUM"; break;
    case GL_INVALID_VALUE: n = "GL_INVALID_VALUE"; break;
    case GL_INVALID_OPERATION: n = "GL_INVALID_OPERATION"; break;
    case GL_OUT_OF_MEMORY: n = "GL_OUT_OF_MEMORY"; break;
    case GL_INVALID_FRAMEBUFFER_OPERATION: n = "GL_INVALID_FRAMEBUFFER_OPERATION"; break;
    default: break;
  }
  std::ostringstream s;
  s << n << " (0x" << std::hex << e << ")";
  return s.str();
}

bool has_word(const char* list, const char* word) {
  if (!list) return false;
  const size_t n = std::strlen(word);
  for (const char* p = list; (p = std::strstr(p, word)) != nullptr; p += n)
    if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return true;
  return false;
}

// The numbered source lines around the first error of a Mesa-style log ("0:123(45): error:").
std::string excerpt(const std::string& src, const std::string& log) {
  auto p = log.find("0:");
  if (p == std::string::npos) return "";
  const int line = std::atoi(log.c_str() + p + 2);
  if (line <= 0) return "";
  std::istringstream in(src);
  std::string s, out;
  for (int n = 1; std::getline(in, s); ++n)
    if (n >= line - 3 && n <= line + 2) out += cat(n, n == line ? " >" : "  ", " ", s, "\n");
  return out;
}

// A display with no window system: Mesa's surfaceless platform, else the first EGL device,
// else the default display (which needs a window system on most drivers).
Expected<EGLDisplay> open_display(std::string& how) {
  const char* client = eglQueryString(EGL_NO_DISPLAY, EGL_EXTENSIONS);
  auto get_platform = reinterpret_cast<PFNEGLGETPLATFORMDISPLAYEXTPROC>(eglGetProcAddress("eglGetPlatformDisplayEXT"));
  if (get_platform && has_word(client, "EGL_MESA_platform_surfaceless")) {
    EGLDisplay d = get_platform(EGL_PLATFORM_SURFACELESS_MESA, EGL_DEFAULT_DISPLAY, nullptr);
    if (d != EGL_NO_DISPLAY && eglInitialize(d, nullptr, nullptr)) {
      how = "EGL surfaceless";
      return d;
    }
  }
  auto query_devices = reinterpret_cast<PFNEGLQUERYDEVICESEXTPROC>(eglGetProcAddress("eglQueryDevicesEXT"));
  if (get_platform && query_devices && has_word(client, "EGL_EXT_platform_device")) {
    EGLDeviceEXT devs[8];
    EGLint n = 0;
    if (query_devices(8, devs, &n))
      for (EGLint i = 0; i < n; ++i) {
        EGLDisplay d = get_platform(EGL_PLATFORM_DEVICE_EXT, devs[i], nullptr);
        if (d != EGL_NO_DISPLAY && eglInitialize(d, nullptr, nullptr)) {
          how = "EGL device";
          return d;
        }
      }
  }
  EGLDisplay d = eglGetDisplay(EGL_DEFAULT_DISPLAY);
  if (d != EGL_NO_DISPLAY && eglInitialize(d, nullptr, nullptr)) {
    how = "EGL default display";
    return d;
  }
  return error(ErrorCode::unavailable, "no EGL display (", egl_error_name(eglGetError()),
               "): neither the surfaceless nor the device platform initialized; on Debian install libegl-mesa0 and "
               "libgl1-mesa-dri (llvmpipe runs OpenGL on the CPU), or a GPU vendor's driver");
}

}  // namespace

Expected<std::shared_ptr<Runtime>> Runtime::create() {
  std::shared_ptr<Runtime> r(new Runtime());
  std::string how;
  RLX_ASSIGN_OR_RETURN(r->display_, open_display(how));
  if (!eglBindAPI(EGL_OPENGL_API))
    return error(ErrorCode::unavailable, "EGL has no desktop OpenGL API (", egl_error_name(eglGetError()), ")");
  EGLConfig config = EGL_NO_CONFIG_KHR;
  if (!has_word(eglQueryString(r->display_, EGL_EXTENSIONS), "EGL_KHR_no_config_context")) {
    const EGLint want[] = {EGL_RENDERABLE_TYPE, EGL_OPENGL_BIT, EGL_NONE};
    EGLint n = 0;
    if (!eglChooseConfig(r->display_, want, &config, 1, &n) || n < 1)
      return error(ErrorCode::unavailable, "EGL lists no OpenGL config (", egl_error_name(eglGetError()), ")");
  }
  // 4.5 core: the GLSL prelude is #version 450 and the runtime uses direct state access
  const EGLint attrs[] = {EGL_CONTEXT_MAJOR_VERSION, 4, EGL_CONTEXT_MINOR_VERSION, 5, EGL_CONTEXT_OPENGL_PROFILE_MASK,
                          EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT, EGL_NONE};
  r->context_ = eglCreateContext(r->display_, config, EGL_NO_CONTEXT, attrs);
  if (r->context_ == EGL_NO_CONTEXT)
    return error(ErrorCode::unavailable, "no OpenGL 4.5 core context through ", how, " (", egl_error_name(eglGetError()),
                 "); rlx needs OpenGL 4.5 compute shaders");
  Gl& gl = r->gl_;
#define RLX_GL_LOAD(type, name)                                                                       \
  gl.name = reinterpret_cast<type>(eglGetProcAddress("gl" #name));                                    \
  if (!gl.name) return error(ErrorCode::unavailable, "the OpenGL driver has no gl" #name);
  RLX_GL_FUNCTIONS(RLX_GL_LOAD)
#undef RLX_GL_LOAD
  Lock lock(*r);
  RLX_TRY(lock.status());
  Caps& c = r->caps_;
  GLint n_ext = 0;
  gl.GetIntegerv(GL_NUM_EXTENSIONS, &n_ext);
  std::vector<std::string> exts;
  for (GLint i = 0; i < n_ext; ++i)
    if (const GLubyte* e = gl.GetStringi(GL_EXTENSIONS, static_cast<GLuint>(i))) exts.emplace_back(reinterpret_cast<const char*>(e));
  auto has = [&](const char* e) {
    for (const std::string& x : exts)
      if (x == e) return true;
    return false;
  };
  GLint major = 0, minor = 0;
  gl.GetIntegerv(GL_MAJOR_VERSION, &major);
  gl.GetIntegerv(GL_MINOR_VERSION, &minor);
  c.fp64 = major >= 4 || has("GL_ARB_gpu_shader_fp64");
  c.int64 = has("GL_ARB_gpu_shader_int64");
  gl.GetIntegerv(GL_MAX_COMPUTE_SHADER_STORAGE_BLOCKS, &c.max_storage_blocks);
  gl.GetIntegerv(GL_SHADER_STORAGE_BUFFER_OFFSET_ALIGNMENT, &c.storage_align);
  c.storage_align = std::max(c.storage_align, 4);
  GLint block = 0;
  gl.GetIntegerv(GL_MAX_SHADER_STORAGE_BLOCK_SIZE, &block);
  c.max_block_bytes = static_cast<uint32_t>(block);  // GLint64 query would be better; Mesa caps it at 2^31-1
  for (GLuint i = 0; i < 3; ++i) gl.GetIntegeri_v(GL_MAX_COMPUTE_WORK_GROUP_COUNT, i, &c.max_groups[i]);
  auto str = [&](GLenum e) {
    const GLubyte* s = gl.GetString(e);
    return s ? std::string(reinterpret_cast<const char*>(s)) : std::string("?");
  };
  if (major < 4 || (major == 4 && minor < 5))
    return error(ErrorCode::unavailable, "the OpenGL context is ", major, ".", minor, " (", str(GL_RENDERER),
                 "); rlx needs 4.5 core");
  if (!c.int64)
    return error(ErrorCode::unavailable, "the OpenGL driver (", str(GL_RENDERER),
                 ") has no GL_ARB_gpu_shader_int64, which rlx's index math needs");
  r->driver_ = cat(str(GL_RENDERER), "\n", str(GL_VERSION));
  GLint formats = 0;
  gl.GetIntegerv(GL_NUM_PROGRAM_BINARY_FORMATS, &formats);
  r->binaries_ = formats > 0 && !std::getenv("RLX_GL_NO_BINARY_CACHE");
  r->description_ = cat(str(GL_RENDERER), ", OpenGL ", str(GL_VERSION), " through ", how, ", ", c.max_storage_blocks,
                        " storage blocks per shader of up to ", c.max_block_bytes >> 20, " MiB", c.fp64 ? ", fp64" : "", ", int64, 8/16-bit types packed in 32-bit words, generated GLSL compute");
  r->limits_.max_bindings = c.max_storage_blocks;
  r->limits_.max_binding_bytes = c.max_block_bytes;
  r->limits_.arena_align = c.storage_align;
  return r;
}

Runtime::Lock::Lock(Runtime& rt) : rt_(rt), lock_(rt.mu_) {
  if (rt_.depth_++ > 0) return;
  if (!eglMakeCurrent(rt_.display_, EGL_NO_SURFACE, EGL_NO_SURFACE, rt_.context_)) {
    status_ = error(ErrorCode::runtime_error, "opengl: eglMakeCurrent failed (", egl_error_name(eglGetError()), ")");
    return;
  }
  made_current_ = true;
}

Runtime::Lock::~Lock() {
  if (--rt_.depth_ > 0) return;
  // released so that another thread can make the context current next
  if (made_current_) eglMakeCurrent(rt_.display_, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
}

Status Runtime::check(const std::string& what) const {
  GLenum e = gl_.GetError();
  if (e == GL_NO_ERROR) return Status::ok();
  std::string more;
  while (GLenum x = gl_.GetError()) {
    if (x == GL_NO_ERROR) break;
    more += ", " + gl_error_name(x);
  }
  return error(ErrorCode::runtime_error, "opengl: ", what, ": ", gl_error_name(e), more);
}

Expected<GLuint> Runtime::program(const std::string& glsl) {
  auto it = programs_.find(glsl);
  if (it != programs_.end()) return it->second;
  const Gl& gl = gl_;
  const std::string dir = codegen::kernel_cache_dir();
  const std::string path = dir + "/gl-" + codegen::hex_key(glsl + "\n//" + driver_) + ".bin";
  if (binaries_) {
    // a stale or foreign binary fails to link: then the source is compiled again
    if (std::ifstream f(path, std::ios::binary); f) {
      std::string bytes((std::istreambuf_iterator<char>(f)), {});
      if (bytes.size() > 4) {
        GLenum format = 0;
        std::memcpy(&format, bytes.data(), 4);
        GLuint prog = gl.CreateProgram();
        gl.ProgramBinary(prog, format, bytes.data() + 4, static_cast<GLsizei>(bytes.size() - 4));
        GLint ok = 0;
        gl.GetProgramiv(prog, GL_LINK_STATUS, &ok);
        while (gl.GetError() != GL_NO_ERROR) ok = 0;
        if (ok) {
          programs_[glsl] = prog;
          return prog;
        }
        gl.DeleteProgram(prog);
      }
    }
  }
  GLuint sh = gl.CreateShader(GL_COMPUTE_SHADER);
  if (!sh) return error(ErrorCode::runtime_error, "opengl: glCreateShader(GL_COMPUTE_SHADER) failed");
  const char* src = glsl.c_str();
  gl.ShaderSource(sh, 1, &src, nullptr);
  gl.CompileShader(sh);
  GLint ok = 0, len = 0;
  gl.GetShaderiv(sh, GL_COMPILE_STATUS, &ok);
  if (!ok) {
    gl.GetShaderiv(sh, GL_INFO_LOG_LENGTH, &len);
    std::string log(static_cast<size_t>(std::max(len, 1)), '\0');
    gl.GetShaderInfoLog(sh, len, nullptr, log.data());
    gl.DeleteShader(sh);
    return error(ErrorCode::runtime_error, "opengl: the compute shader did not compile:\n", log.c_str(), "\n",
                 excerpt(glsl, log));
  }
  GLuint prog = gl.CreateProgram();
  if (binaries_) gl.ProgramParameteri(prog, GL_PROGRAM_BINARY_RETRIEVABLE_HINT, GL_TRUE);
  gl.AttachShader(prog, sh);
  gl.LinkProgram(prog);
  gl.DeleteShader(sh);  // stays alive while attached
  gl.GetProgramiv(prog, GL_LINK_STATUS, &ok);
  if (!ok) {
    gl.GetProgramiv(prog, GL_INFO_LOG_LENGTH, &len);
    std::string log(static_cast<size_t>(std::max(len, 1)), '\0');
    gl.GetProgramInfoLog(prog, len, nullptr, log.data());
    gl.DeleteProgram(prog);
    return error(ErrorCode::runtime_error, "opengl: the compute program did not link:\n", log.c_str());
  }
  programs_[glsl] = prog;
  GLint n = 0;
  if (binaries_) gl.GetProgramiv(prog, GL_PROGRAM_BINARY_LENGTH, &n);
  if (n > 0 && codegen::make_dirs(dir)) {  // a cache that cannot be written is only slower
    std::string bytes(static_cast<size_t>(n) + 4, '\0');
    GLenum format = 0;
    GLsizei got = 0;
    gl.GetProgramBinary(prog, n, &got, &format, bytes.data() + 4);
    if (gl.GetError() == GL_NO_ERROR && got > 0) {
      std::memcpy(bytes.data(), &format, 4);
      const std::string tmp = cat(path, ".", getpid(), ".tmp");
      std::ofstream f(tmp, std::ios::binary);
      f.write(bytes.data(), static_cast<std::streamsize>(got) + 4);
      f.close();
      if (f) std::rename(tmp.c_str(), path.c_str());  // atomic: readers see no half-written file
    }
  }
  return prog;
}

}  // namespace rlx::opengl

// ---- the device runtime layer (hal.h) ----

namespace rlx::opengl {

Expected<hal::Buffer> Runtime::allocate(uint64_t bytes, const std::string& what) {
  Lock lock(*this);
  RLX_TRY(lock.status());
  GLuint name = 0;
  gl_.CreateBuffers(1, &name);
  gl_.NamedBufferStorage(name, static_cast<GLsizeiptr>(bytes), nullptr, GL_DYNAMIC_STORAGE_BIT);
  Status s = check("allocating " + what);
  if (!s) {
    gl_.DeleteBuffers(1, &name);
    return s;
  }
  return hal::Buffer{name, bytes};
}

void Runtime::release(hal::Buffer b) {
  Lock lock(*this);
  if (!lock.status()) return;  // no context: the buffers go with the process
  const GLuint name = static_cast<GLuint>(b.id);
  if (name) gl_.DeleteBuffers(1, &name);
}

Status Runtime::upload(const hal::BufferRange& r, const void* data, uint64_t bytes) {
  Lock lock(*this);
  RLX_TRY(lock.status());
  RLX_TRY(write(r, data, bytes));
  return check("uploading");
}

Status Runtime::download(const hal::BufferRange& r, void* data, uint64_t bytes) {
  Lock lock(*this);
  RLX_TRY(lock.status());
  RLX_TRY(read(r, data, bytes));
  return check("downloading");
}

Expected<std::vector<hal::Kernel>> Runtime::build(const hal::KernelModule& module) {
  Lock lock(*this);
  RLX_TRY(lock.status());
  std::vector<hal::Kernel> out;
  for (const hal::KernelEntry& e : module.entries) {
    RLX_ASSIGN_OR_RETURN(GLuint p, program(module.source));
    std::unique_ptr<Kernel>& k = kernels_[{p, e.scalars}];
    if (!k) {
      k = std::make_unique<Kernel>();
      k->program = p;
      for (const std::string& u : e.scalars) k->uniforms.push_back(gl_.GetUniformLocation(p, u.c_str()));
    }
    out.push_back({reinterpret_cast<uint64_t>(k.get())});
  }
  return out;
}

Status Runtime::dispatch_groups(const hal::Dispatch& d, GLuint out[3]) const {
  const uint32_t max[3] = {static_cast<uint32_t>(caps_.max_groups[0]), static_cast<uint32_t>(caps_.max_groups[1]),
                           static_cast<uint32_t>(caps_.max_groups[2])};
  return hal::dispatch_groups(d, codegen::kGlslWorkgroupSize, max, "opengl", out);
}

Status Runtime::check_dispatch(const hal::Dispatch& d) const {
  GLuint g[3];
  return dispatch_groups(d, g);
}

Status Runtime::replay(hal::Recording& r, std::span<const void* const> inputs, std::span<void* const> outputs) {
  Lock lock(*this);
  RLX_TRY(lock.status());
  return StreamRuntime::replay(r, inputs, outputs);
}

Status Runtime::write(const hal::BufferRange& r, const void* data, uint64_t bytes) {
  gl_.NamedBufferSubData(static_cast<GLuint>(r.buffer.id), static_cast<GLintptr>(r.offset), static_cast<GLsizeiptr>(bytes), data);
  return Status::ok();
}

Status Runtime::read(const hal::BufferRange& r, void* data, uint64_t bytes) {
  // the read (and the next run's input writes) see every shader write before it
  gl_.MemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
  gl_.GetNamedBufferSubData(static_cast<GLuint>(r.buffer.id), static_cast<GLintptr>(r.offset), static_cast<GLsizeiptr>(bytes), data);
  return Status::ok();
}

Status Runtime::finish() {
  gl_.UseProgram(0);
  return check("running the program");
}

Status Runtime::enqueue(const hal::Command& c) {
  if (c.kind == hal::Command::Kind::zero) {
    const std::vector<uint8_t> zeros(c.range.bytes, 0);
    RLX_TRY(write(c.range, zeros.data(), c.range.bytes));
    gl_.MemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
    return Status::ok();
  }
  const hal::Dispatch& d = c.dispatch;
  const Kernel& k = *reinterpret_cast<const Kernel*>(d.kernel.id);
  gl_.UseProgram(k.program);
  for (size_t i = 0; i < d.buffers.size(); ++i) {
    const hal::BufferRange& b = d.buffers[i];
    const GLuint name = static_cast<GLuint>(b.buffer.id);
    if (b.offset == 0 && b.bytes >= b.buffer.bytes) gl_.BindBufferBase(GL_SHADER_STORAGE_BUFFER, static_cast<GLuint>(i), name);
    else gl_.BindBufferRange(GL_SHADER_STORAGE_BUFFER, static_cast<GLuint>(i), name, static_cast<GLintptr>(b.offset),
                             static_cast<GLsizeiptr>(b.bytes));
  }
  for (size_t i = 0; i < k.uniforms.size() && i < d.scalars.size(); ++i)
    if (k.uniforms[i] >= 0) gl_.Uniform1i64ARB(k.uniforms[i], d.scalars[i]);
  GLuint g[3];
  RLX_TRY(dispatch_groups(d, g));
  gl_.DispatchCompute(g[0], g[1], g[2]);
  gl_.MemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
  return Status::ok();
}

}  // namespace rlx::opengl
