#include "vulkan_device.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "../../codegen/c_renderer.h"
#include "../../codegen/glsl_prelude.h"
#include "../../passes/schedule.h"
#include "backends/csr_spmv.h"
#include "backends/gemm_plan.h"
#include "rlx/compile.h"
#include "vulkan_runtime.h"

namespace rlx::vulkan {
namespace {

constexpr uint32_t kDomainPushBytes = 16;  // int64 rows, cols
constexpr uint32_t kGemmPushBytes = 80;    // ten int64 (see glsl_gemm_source)

// A dot the tiled kernel computes: f32, one contracting dim, batch dims leading (the CPU's
// GEMM planner decides the layout; its plan is device-independent).

// One dispatch of the recorded command buffer.
struct Step {
  const Pipeline* pipeline = nullptr;
  VkDescriptorSet set = VK_NULL_HANDLE;
  int64_t push[10] = {};
  uint32_t groups[3] = {0, 0, 0};  // 0 anywhere: nothing to run
  int flags = -1;                  // the CSR kernel: its index-check word in flags_ (csr_spmv.h)
  VkBuffer zero = VK_NULL_HANDLE;  // an output zeroed before the dispatch (the transposed SpMV's)
};

// A compiled program: one device buffer per kernel-level buffer (views share their target's),
// weights and constants uploaded once, a staging buffer per input and output, and one command
// buffer recorded once: copy the inputs in, dispatch every kernel with a barrier after each,
// copy the outputs out. A run fills the staging buffers, submits and waits.
class VulkanExecutable final : public Executable {
 public:
  VulkanExecutable(std::shared_ptr<Runtime> rt, kir::KernelProgram prog) : rt_(std::move(rt)), prog_(std::move(prog)) {}
  ~VulkanExecutable() override {
    VkDevice d = rt_->device();
    if (cmd_pool_) vkDestroyCommandPool(d, cmd_pool_, nullptr);
    if (desc_pool_) vkDestroyDescriptorPool(d, desc_pool_, nullptr);
    for (size_t i = 0; i < mem_.size(); ++i)
      if (owns_[i]) rt_->destroy_buffer(mem_[i]);
    for (Buffer& b : stage_in_) rt_->destroy_buffer(b);
    for (Buffer& b : stage_out_) rt_->destroy_buffer(b);
    for (Buffer& b : flags_) rt_->destroy_buffer(b);
  }
  Status init(const Graph& g);
  Expected<std::vector<Tensor>> run(std::span<const Tensor> inputs) override;
  Status run_into(std::span<const Tensor> inputs, std::span<Tensor> outputs) override;
  const ExecStats& stats() const override { return stats_; }

 private:
  int root(int b) const {
    while (prog_.buffers[b].alias_of >= 0) b = prog_.buffers[b].alias_of;
    return b;
  }
  Status upload_constants(const Graph& g);
  Status build_steps();
  Status record();
  void groups_for(int64_t invocations, uint32_t out[3]) const;

  std::shared_ptr<Runtime> rt_;
  kir::KernelProgram prog_;
  std::vector<Buffer> mem_;  // per kernel-level buffer (a view holds its target's handles)
  std::vector<char> owns_;
  std::vector<Buffer> stage_in_, stage_out_;
  std::vector<Buffer> flags_;           // host-visible index-check words of the CSR kernels
  std::vector<std::string> flag_nodes_; // their nodes' names
  std::vector<Op> flag_ops_;            // and ops
  std::vector<Step> steps_;
  VkDescriptorPool desc_pool_ = VK_NULL_HANDLE;
  VkCommandPool cmd_pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  ExecStats stats_;
  std::mutex mu_;
};

void VulkanExecutable::groups_for(int64_t invocations, uint32_t out[3]) const {
  const int64_t groups = (invocations + codegen::kGlslWorkgroupSize - 1) / codegen::kGlslWorkgroupSize;
  const int64_t max_x = std::max<uint32_t>(rt_->caps().max_groups[0], 1);
  out[0] = static_cast<uint32_t>(std::min(groups, max_x));
  out[1] = static_cast<uint32_t>((groups + max_x - 1) / max_x);  // the shader numbers x + y * groups_x
  out[2] = 1;
}

Status VulkanExecutable::init(const Graph& g) {
  const size_t nb = prog_.buffers.size();
  mem_.assign(nb, Buffer{});
  owns_.assign(nb, 0);
  for (size_t i = 0; i < nb; ++i) {
    const kir::Buffer& b = prog_.buffers[i];
    if (b.alias_of >= 0) continue;
    RLX_ASSIGN_OR_RETURN(mem_[i], rt_->create_buffer(b.bytes(), false, cat("buffer b", i, b.name.empty() ? "" : " '" + b.name + "'")));
    owns_[i] = 1;
    if (b.kind == kir::BufferKind::intermediate) stats_.arena_bytes += b.bytes();
  }
  for (size_t i = 0; i < nb; ++i)
    if (prog_.buffers[i].alias_of >= 0) mem_[i] = mem_[root(static_cast<int>(i))];
  VkCommandPoolCreateInfo cpi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  cpi.queueFamilyIndex = rt_->queue_family();
  RLX_TRY(vk_check(vkCreateCommandPool(rt_->device(), &cpi, nullptr, &cmd_pool_), "vkCreateCommandPool"));
  VkCommandBufferAllocateInfo cai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  cai.commandPool = cmd_pool_;
  cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cai.commandBufferCount = 1;
  RLX_TRY(vk_check(vkAllocateCommandBuffers(rt_->device(), &cai, &cmd_), "vkAllocateCommandBuffers"));
  RLX_TRY(upload_constants(g));
  for (size_t i = 0; i < prog_.inputs.size(); ++i) {
    RLX_ASSIGN_OR_RETURN(Buffer s, rt_->create_buffer(prog_.buffers[prog_.inputs[i]].bytes(), true, cat("input ", i)));
    stage_in_.push_back(s);
  }
  for (size_t i = 0; i < prog_.outputs.size(); ++i) {
    RLX_ASSIGN_OR_RETURN(Buffer s, rt_->create_buffer(prog_.buffers[prog_.outputs[i]].bytes(), true, cat("output ", i)));
    stage_out_.push_back(s);
  }
  RLX_TRY(build_steps());
  rt_->save_pipeline_cache();
  RLX_TRY(record());
  stats_.generated_kernels = static_cast<int>(prog_.generated.size());
  stats_.native_kernels = static_cast<int>(prog_.natives.size());
  stats_.kernel_listing = prog_.listing();
  for (const kir::Step& s : prog_.steps)
    stats_.kernel_origins.push_back(s.native ? std::make_pair(prog_.natives[s.index].name, prog_.natives[s.index].origins)
                                             : std::make_pair(prog_.generated[s.index].name, prog_.generated[s.index].origins));
  return Status::ok();
}

// Weights and constants go up once, through one staging buffer and one submission.
Status VulkanExecutable::upload_constants(const Graph& g) {
  std::vector<std::pair<size_t, const Tensor*>> ups;
  size_t total = 0;
  for (size_t i = 0; i < prog_.buffers.size(); ++i) {
    const kir::Buffer& b = prog_.buffers[i];
    if (b.alias_of >= 0 || b.bytes() == 0) continue;
    const Tensor* data = nullptr;
    if (b.kind == kir::BufferKind::weight) {
      auto it = g.weights.find(b.name);
      if (it == g.weights.end() || !it->second.storage())
        return error(ErrorCode::invalid_argument, "weight '", b.name, "' has no data");
      if (it->second.dtype() != b.dtype || it->second.sizes() != b.sizes)
        return error(ErrorCode::shape_error, "weight '", b.name, "' is ", it->second.type().to_string(),
                     ", the graph expects ", dtype_name(b.dtype), sizes_to_string(b.sizes));
      data = &it->second;
      stats_.weight_bytes += b.bytes();
    } else if (b.kind == kir::BufferKind::constant) {
      data = &b.data;
    }
    if (!data) continue;
    ups.push_back({i, data});
    total += (b.bytes() + 15) / 16 * 16;
  }
  if (ups.empty()) return Status::ok();
  RLX_ASSIGN_OR_RETURN(Buffer staging, rt_->create_buffer(total, true, "uploading weights and constants"));
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  Status s = vk_check(vkBeginCommandBuffer(cmd_, &bi), "vkBeginCommandBuffer");
  size_t off = 0;
  for (auto [i, t] : ups) {
    const size_t n = prog_.buffers[i].bytes();
    std::memcpy(static_cast<uint8_t*>(staging.map) + off, t->bytes(), n);
    VkBufferCopy c{off, 0, n};
    if (s) vkCmdCopyBuffer(cmd_, staging.buffer, mem_[i].buffer, 1, &c);
    off += (n + 15) / 16 * 16;
  }
  if (s) s = vk_check(vkEndCommandBuffer(cmd_), "vkEndCommandBuffer");
  if (s) s = rt_->submit_and_wait(cmd_);
  rt_->destroy_buffer(staging);
  RLX_TRY(s);
  return vk_check(vkResetCommandBuffer(cmd_, 0), "vkResetCommandBuffer");
}

Status VulkanExecutable::build_steps() {
  // pipelines: one shader per generated kernel, the shared GEMM shader for native dots
  const std::string prelude = codegen::glsl_prelude(codegen::CTarget::glsl_vulkan);
  if (std::getenv("RLX_DUMP_GLSL")) std::fprintf(stderr, "%s\n", prog_.to_text().c_str());
  std::vector<const Pipeline*> gen(prog_.generated.size(), nullptr);
  for (size_t i = 0; i < prog_.generated.size(); ++i) {
    const kir::GeneratedKernel& k = prog_.generated[i];
    std::vector<DType> dts;
    for (int b : k.args) dts.push_back(prog_.buffers[b].dtype);
    RLX_ASSIGN_OR_RETURN(std::string body, codegen::render_c_kernel(k, dts, "rlx_" + k.name, codegen::CTarget::glsl_vulkan));
    if (std::getenv("RLX_DUMP_GLSL")) std::fprintf(stderr, "%s\n", body.c_str());  // the kernel, without the prelude
    auto p = rt_->pipeline(prelude + body, static_cast<uint32_t>(k.args.size()), kDomainPushBytes);
    if (!p) return error(p.status().code(), "kernel ", k.name, ": ", p.status().message());
    gen[i] = *p;
  }
  const Pipeline* gemm = nullptr;
  if (!prog_.natives.empty()) {
    RLX_ASSIGN_OR_RETURN(gemm, rt_->pipeline(codegen::glsl_gemm_source(codegen::CTarget::glsl_vulkan), 3, kGemmPushBytes));
  }
  // descriptor sets: one per step
  uint32_t descriptors = 0;
  for (const kir::Step& s : prog_.steps)
    descriptors += s.native ? (backends::csr_kernel_op(prog_.natives[s.index].op) ? 6 : 3)
                            : static_cast<uint32_t>(prog_.generated[s.index].args.size());
  if (prog_.steps.empty()) return Status::ok();
  VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, std::max<uint32_t>(descriptors, 1)};
  VkDescriptorPoolCreateInfo dpi{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  dpi.maxSets = static_cast<uint32_t>(prog_.steps.size());
  dpi.poolSizeCount = 1;
  dpi.pPoolSizes = &size;
  RLX_TRY(vk_check(vkCreateDescriptorPool(rt_->device(), &dpi, nullptr, &desc_pool_), "vkCreateDescriptorPool"));
  for (const kir::Step& s : prog_.steps) {
    Step st;
    std::vector<int> bufs;
    if (s.native) {
      const kir::NativeKernel& nk = prog_.natives[s.index];
      NodeDesc d{nk.op, nk.attrs, nk.input_types, nk.output_types, nk.name};
      if (backends::csr_kernel_op(nk.op)) {
        RLX_ASSIGN_OR_RETURN(backends::CsrSpmvPlan p, backends::plan_csr_spmv(d));
        RLX_ASSIGN_OR_RETURN(st.pipeline, rt_->pipeline(backends::csr_spmv_glsl_source(p, false), 6, 32));
        RLX_ASSIGN_OR_RETURN(Buffer fl, rt_->create_buffer(4, true, "CSR index-check flag"));
        flags_.push_back(fl);
        flag_nodes_.push_back(nk.name);
        flag_ops_.push_back(nk.op);
        st.flags = static_cast<int>(flags_.size()) - 1;
        const int64_t v[4] = {p.n, p.m, p.k, p.nnz};
        std::copy(v, v + 4, st.push);
        if (p.work_items > 0) groups_for(p.work_items, st.groups);
        if (p.zero_output) st.zero = mem_[nk.outputs[0]].buffer;
        VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
        ai.descriptorPool = desc_pool_;
        ai.descriptorSetCount = 1;
        ai.pSetLayouts = &st.pipeline->set_layout;
        RLX_TRY(vk_check(vkAllocateDescriptorSets(rt_->device(), &ai, &st.set), "vkAllocateDescriptorSets"));
        const VkBuffer bufs[6] = {mem_[nk.inputs[0]].buffer, mem_[nk.inputs[1]].buffer, mem_[nk.inputs[2]].buffer,
                                  mem_[nk.inputs[3]].buffer, mem_[nk.outputs[0]].buffer, fl.buffer};
        VkDescriptorBufferInfo infos[6];
        VkWriteDescriptorSet writes[6];
        for (uint32_t a = 0; a < 6; ++a) {
          infos[a] = {bufs[a], 0, VK_WHOLE_SIZE};
          writes[a] = VkWriteDescriptorSet{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
          writes[a].dstSet = st.set;
          writes[a].dstBinding = a;
          writes[a].descriptorCount = 1;
          writes[a].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
          writes[a].pBufferInfo = &infos[a];
        }
        vkUpdateDescriptorSets(rt_->device(), 6, writes, 0, nullptr);
        steps_.push_back(st);
        continue;
      }
      RLX_ASSIGN_OR_RETURN(backends::GemmPlan p, backends::plan_tiled_gemm(d));
      st.pipeline = gemm;
      bufs = {nk.inputs[0], nk.inputs[1], nk.outputs[0]};
      const int64_t v[10] = {p.m, p.n, p.k, p.stride_a, p.trans_a ? 1 : p.lda, p.trans_a ? p.lda : 1,
                             p.stride_b, p.trans_b ? 1 : p.ldb, p.trans_b ? p.ldb : 1, p.stride_c};
      std::copy(v, v + 10, st.push);
      if (p.m * p.n * p.batch > 0) {
        st.groups[0] = static_cast<uint32_t>((p.n + 15) / 16);
        st.groups[1] = static_cast<uint32_t>((p.m + 15) / 16);
        st.groups[2] = static_cast<uint32_t>(p.batch);
        const auto& mg = rt_->caps().max_groups;
        if (st.groups[0] > mg[0] || st.groups[1] > mg[1] || st.groups[2] > mg[2])
          return error(ErrorCode::unsupported, "vulkan: the product ", nk.name, " needs ", st.groups[0], "x", st.groups[1], "x",
                       st.groups[2], " work groups, more than this device dispatches");
      }
    } else {
      const kir::GeneratedKernel& k = prog_.generated[s.index];
      st.pipeline = gen[s.index];
      bufs = k.args;
      st.push[0] = k.rows();
      st.push[1] = k.cols();
      // a copy onto the same memory (a donated buffer) is nothing to do
      const bool aliased = k.skip_if_aliased && k.args.size() >= 2 && root(k.args[0]) == root(k.args[1]);
      const int64_t n = k.rows() * k.cols();
      if (!aliased && n > 0) {
        if (k.serial) st.groups[0] = st.groups[1] = st.groups[2] = 1;
        else groups_for(n, st.groups);
      }
    }
    VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    ai.descriptorPool = desc_pool_;
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &st.pipeline->set_layout;
    RLX_TRY(vk_check(vkAllocateDescriptorSets(rt_->device(), &ai, &st.set), "vkAllocateDescriptorSets"));
    std::vector<VkDescriptorBufferInfo> infos(bufs.size());
    std::vector<VkWriteDescriptorSet> writes(bufs.size());
    for (size_t a = 0; a < bufs.size(); ++a) {
      infos[a] = {mem_[bufs[a]].buffer, 0, VK_WHOLE_SIZE};
      writes[a] = VkWriteDescriptorSet{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
      writes[a].dstSet = st.set;
      writes[a].dstBinding = static_cast<uint32_t>(a);
      writes[a].descriptorCount = 1;
      writes[a].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[a].pBufferInfo = &infos[a];
    }
    vkUpdateDescriptorSets(rt_->device(), static_cast<uint32_t>(writes.size()), writes.data(), 0, nullptr);
    steps_.push_back(st);
  }
  return Status::ok();
}

void barrier(VkCommandBuffer cb, VkPipelineStageFlags src, VkAccessFlags src_access, VkPipelineStageFlags dst,
             VkAccessFlags dst_access) {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = src_access;
  mb.dstAccessMask = dst_access;
  vkCmdPipelineBarrier(cb, src, dst, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

Status VulkanExecutable::record() {
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  RLX_TRY(vk_check(vkBeginCommandBuffer(cmd_, &bi), "vkBeginCommandBuffer"));
  const VkAccessFlags shader_rw = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  // Inputs are copied in before any kernel runs and outputs copied out after the last, so an
  // output may share host memory with an input (a donated cache) safely.
  for (size_t i = 0; i < prog_.inputs.size(); ++i) {
    const size_t n = prog_.buffers[prog_.inputs[i]].bytes();
    if (n == 0) continue;
    VkBufferCopy c{0, 0, n};
    vkCmdCopyBuffer(cmd_, stage_in_[i].buffer, mem_[prog_.inputs[i]].buffer, 1, &c);
  }
  for (Buffer& f : flags_) vkCmdFillBuffer(cmd_, f.buffer, 0, 4, 0);
  barrier(cmd_, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, shader_rw);
  for (const Step& s : steps_) {
    // zeroed even when A has no rows (no groups): y = A^T x is then all zeros
    if (s.zero != VK_NULL_HANDLE) {
      vkCmdFillBuffer(cmd_, s.zero, 0, VK_WHOLE_SIZE, 0);
      barrier(cmd_, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
              shader_rw);
    }
    if (s.groups[0] == 0 || s.groups[1] == 0 || s.groups[2] == 0) continue;
    vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, s.pipeline->pipeline);
    vkCmdBindDescriptorSets(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, s.pipeline->layout, 0, 1, &s.set, 0, nullptr);
    vkCmdPushConstants(cmd_, s.pipeline->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, s.pipeline->push_bytes, s.push);
    vkCmdDispatch(cmd_, s.groups[0], s.groups[1], s.groups[2]);
    barrier(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
            shader_rw);
  }
  barrier(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
          VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_READ_BIT);
  for (size_t i = 0; i < prog_.outputs.size(); ++i) {
    const size_t n = prog_.buffers[prog_.outputs[i]].bytes();
    if (n == 0) continue;
    VkBufferCopy c{0, 0, n};
    vkCmdCopyBuffer(cmd_, mem_[prog_.outputs[i]].buffer, stage_out_[i].buffer, 1, &c);
  }
  barrier(cmd_, VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
          VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
  return vk_check(vkEndCommandBuffer(cmd_), "vkEndCommandBuffer");
}

Status VulkanExecutable::run_into(std::span<const Tensor> inputs, std::span<Tensor> outputs) {
  std::lock_guard<std::mutex> lock(mu_);
  RLX_TRY(kir::check_run_io(prog_, inputs, outputs));
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].nbytes()) std::memcpy(stage_in_[i].map, inputs[i].bytes(), inputs[i].nbytes());
  RLX_TRY(rt_->submit_and_wait(cmd_));
  for (size_t i = 0; i < outputs.size(); ++i)
    if (outputs[i].nbytes()) std::memcpy(outputs[i].bytes(), stage_out_[i].map, outputs[i].nbytes());
  // the CSR kernels' index checks (a bad index was skipped, never followed)
  for (size_t i = 0; i < flags_.size(); ++i) {
    int f = 0;
    std::memcpy(&f, flags_[i].map, sizeof f);
    if (f) return backends::csr_spmv_flag_error(f, flag_nodes_[i], flag_ops_[i]);
  }
  return Status::ok();
}

Expected<std::vector<Tensor>> VulkanExecutable::run(std::span<const Tensor> inputs) {
  std::vector<Tensor> outs = kir::allocate_outputs(prog_);
  RLX_TRY(run_into(inputs, outs));
  return outs;
}

class VulkanDevice final : public Device {
 public:
  VulkanDevice() {
    info_.name = "vulkan";
    auto rt = Runtime::create();
    if (!rt) {
      info_.available = false;
      info_.reason = rt.status().message();
      return;
    }
    rt_ = *rt;
    const Caps& c = rt_->caps();
    info_.available = true;
    info_.description = rt_->description();
    info_.dtypes = {DType::f32, DType::i32, DType::u32, DType::i64, DType::u64};
    if (c.int16) info_.dtypes.insert(info_.dtypes.end(), {DType::f16, DType::bf16, DType::i16, DType::u16});
    if (c.int8) info_.dtypes.insert(info_.dtypes.end(), {DType::i8, DType::u8, DType::boolean});
    if (c.fp64) info_.dtypes.push_back(DType::f64);
    caps_.fp64 = c.fp64;
    caps_.int8 = c.int8;
    caps_.int16 = c.int16;
    caps_.why_no_int8 = "this Vulkan device has no 8-bit storage and arithmetic (storageBuffer8BitAccess, shaderInt8)";
    caps_.why_no_int16 = "this Vulkan device has no 16-bit storage and arithmetic (storageBuffer16BitAccess, shaderInt16)";
  }
  const DeviceInfo& info() const override { return info_; }

  Claim claim_native(const NodeDesc& n) const override {
    if (op_info(n.op).family == OpFamily::sparse) return backends::claim_csr_spmv(n, "vulkan", rt_->caps().fp64);
    return backends::claim_tiled_gemm(n, "vulkan");
  }

  Claim supports_primitive(const NodeDesc& n) const override { return codegen::glsl_supports(n, caps_); }

  Expected<std::unique_ptr<Executable>> compile(const Graph& g, const CompileOptions& options) const override {
    RLX_ASSIGN_OR_RETURN(kir::KernelProgram prog, sched::schedule(g));
    RLX_TRY(sched::apply_donations(prog, options.donate));  // a donated output shares its input's buffer
    RLX_TRY(kir::verify_program(prog));
    auto e = std::make_unique<VulkanExecutable>(rt_, std::move(prog));
    RLX_TRY(e->init(g));
    return std::unique_ptr<Executable>(std::move(e));
  }

 private:
  DeviceInfo info_;
  codegen::GlslCaps caps_;
  std::shared_ptr<Runtime> rt_;
};

}  // namespace

std::shared_ptr<const Device> make_vulkan_device() { return std::make_shared<VulkanDevice>(); }

}  // namespace rlx::vulkan
