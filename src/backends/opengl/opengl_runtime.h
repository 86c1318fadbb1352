// OpenGL runtime pieces shared by the device and its executables: a headless OpenGL 4.5 core
// context made through EGL (the surfaceless platform, else the EGL device platform, else the
// default display), the GL entry points rlx calls (loaded with eglGetProcAddress, so only
// libEGL is linked), compute programs compiled from GLSL and cached by source, and the lock
// that makes the one context current on the calling thread.
#pragma once

#include <EGL/egl.h>
#include <GL/glcorearb.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "hal/hal.h"
#include "rlx/status.h"

namespace rlx::opengl {

// The GL functions rlx uses, loaded once when the context is made.
struct Gl {
#define RLX_GL_FUNCTIONS(X)                                                                                   \
  X(PFNGLGETSTRINGPROC, GetString) X(PFNGLGETSTRINGIPROC, GetStringi) X(PFNGLGETINTEGERVPROC, GetIntegerv)  \
  X(PFNGLGETINTEGERI_VPROC, GetIntegeri_v) X(PFNGLGETERRORPROC, GetError)                                   \
  X(PFNGLCREATESHADERPROC, CreateShader) X(PFNGLSHADERSOURCEPROC, ShaderSource)                             \
  X(PFNGLCOMPILESHADERPROC, CompileShader) X(PFNGLGETSHADERIVPROC, GetShaderiv)                             \
  X(PFNGLGETSHADERINFOLOGPROC, GetShaderInfoLog) X(PFNGLDELETESHADERPROC, DeleteShader)                     \
  X(PFNGLCREATEPROGRAMPROC, CreateProgram) X(PFNGLATTACHSHADERPROC, AttachShader)                           \
  X(PFNGLLINKPROGRAMPROC, LinkProgram) X(PFNGLGETPROGRAMIVPROC, GetProgramiv)                               \
  X(PFNGLGETPROGRAMINFOLOGPROC, GetProgramInfoLog) X(PFNGLDELETEPROGRAMPROC, DeleteProgram)                 \
  X(PFNGLUSEPROGRAMPROC, UseProgram) X(PFNGLCREATEBUFFERSPROC, CreateBuffers)                               \
  X(PFNGLNAMEDBUFFERSTORAGEPROC, NamedBufferStorage) X(PFNGLNAMEDBUFFERSUBDATAPROC, NamedBufferSubData)     \
  X(PFNGLGETNAMEDBUFFERSUBDATAPROC, GetNamedBufferSubData) X(PFNGLDELETEBUFFERSPROC, DeleteBuffers)         \
  X(PFNGLBINDBUFFERBASEPROC, BindBufferBase) X(PFNGLBINDBUFFERRANGEPROC, BindBufferRange)                     \
  X(PFNGLDISPATCHCOMPUTEPROC, DispatchCompute)                   \
  X(PFNGLMEMORYBARRIERPROC, MemoryBarrier) X(PFNGLUNIFORM1I64ARBPROC, Uniform1i64ARB)                       \
  X(PFNGLFINISHPROC, Finish) X(PFNGLGETUNIFORMLOCATIONPROC, GetUniformLocation)                             \
  X(PFNGLGETPROGRAMBINARYPROC, GetProgramBinary) X(PFNGLPROGRAMBINARYPROC, ProgramBinary)                   \
  X(PFNGLPROGRAMPARAMETERIPROC, ProgramParameteri)
#define RLX_GL_MEMBER(type, name) type name = nullptr;
  RLX_GL_FUNCTIONS(RLX_GL_MEMBER)
#undef RLX_GL_MEMBER
};

// What the context offers, as the driver reports it.
struct Caps {
  bool fp64 = false;   // GL 4.0+ or GL_ARB_gpu_shader_fp64
  bool int64 = false;  // GL_ARB_gpu_shader_int64 (rlx's index math needs it)
  int max_storage_blocks = 0;      // GL_MAX_COMPUTE_SHADER_STORAGE_BLOCKS
  int storage_align = 256;         // GL_SHADER_STORAGE_BUFFER_OFFSET_ALIGNMENT
  int64_t max_block_bytes = 0;     // GL_MAX_SHADER_STORAGE_BLOCK_SIZE
  int max_groups[3] = {0, 0, 0};   // GL_MAX_COMPUTE_WORK_GROUP_COUNT
};

// The device runtime layer's runtime (hal.h) for the opengl device: a hal::Buffer is a GL
// buffer name, a kernel a linked program with its uniform locations; every call takes the
// Lock, a replay holds it throughout.
class Runtime final : public hal::StreamRuntime {
 public:
  // The display and context, made once per process; an error saying why when there is no
  // EGL, no display, no OpenGL 4.5 core context, or no GL_ARB_gpu_shader_int64.
  static Expected<std::shared_ptr<Runtime>> create();
  // The context is deliberately not destroyed: the runtime lives until the process exits,
  // and tearing EGL down from static destructors races with the driver's own exit handlers.
  ~Runtime() = default;
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const Gl& gl() const { return gl_; }
  const Caps& caps() const { return caps_; }
  const std::string& description() const { return description_; }

  // Holds the runtime's mutex with the context current on this thread (an EGL context is
  // current on one thread at a time, so it is released again when the lock ends). Every GL
  // call happens under one.
  class Lock {
   public:
    explicit Lock(Runtime& rt);
    ~Lock();
    Lock(const Lock&) = delete;
    Lock& operator=(const Lock&) = delete;
    const Status& status() const { return status_; }

   private:
    Runtime& rt_;
    std::unique_lock<std::recursive_mutex> lock_;
    bool made_current_ = false;
    Status status_;
  };

  // The linked compute program for `glsl`, made once per process (kept until exit): from the
  // disk cache ($RLX_CACHE_DIR/gl-<key>.bin, the driver's program binary keyed by the source,
  // renderer and driver version) when the driver offers program binaries, else compiled (and
  // then saved there). Compile errors carry the driver's log and the numbered source lines
  // around the first error. Call with a Lock held.
  Expected<GLuint> program(const std::string& glsl);

  // An rlx error if the GL error flag is set: "opengl: <what>: GL_OUT_OF_MEMORY (0x505)".
  // Call with a Lock held.
  Status check(const std::string& what) const;

  // hal::Runtime
  RLX_HAL_RUNTIME_METHODS;
  Status check_dispatch(const hal::Dispatch& d) const override;
  Status replay(hal::Recording& r, std::span<const void* const> inputs, std::span<void* const> outputs) override;

 protected:
  RLX_HAL_STREAM_METHODS;

 private:
  Runtime() : hal::StreamRuntime("opengl") {}

  EGLDisplay display_ = EGL_NO_DISPLAY;
  EGLContext context_ = EGL_NO_CONTEXT;
  Gl gl_;
  Caps caps_;
  std::string description_;
  std::string driver_;  // renderer and version, part of the disk cache key
  bool binaries_ = false;  // GL_NUM_PROGRAM_BINARY_FORMATS > 0
  std::recursive_mutex mu_;
  int depth_ = 0;  // nesting of Locks on the owning thread
  std::map<std::string, GLuint> programs_;
  // A built kernel: its program and the locations of its scalar uniforms (-1: dropped by the
  // driver as unused).
  struct Kernel {
    GLuint program = 0;
    std::vector<GLint> uniforms;
  };
  std::map<std::pair<GLuint, std::vector<std::string>>, std::unique_ptr<Kernel>> kernels_;
  // the work groups of `d` (hal::dispatch_groups with this driver's limits)
  Status dispatch_groups(const hal::Dispatch& d, GLuint out[3]) const;
};

}  // namespace rlx::opengl
