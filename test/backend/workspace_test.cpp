// The per-CompiledFunction workspace: intermediates live at static offsets in one pooled
// buffer that is reused across calls.
#include "test_util.h"

namespace refjit::testing {
namespace {

// transpose and the scan body's intermediates need buffers of their own.
const char* kProgram = R"({ lambda ; x:f32[64,32] c:f32[32]. let
    t:f32[32,64] = transpose[permutation=(1, 0)] x
    u:f32[32,64] = add t 1.0:f32[]
    s:f32[32] ys:f32[64,32] = scan[jaxpr={ lambda ; k:f32[32] r:f32[32]. let
        m:f32[32] = mul k r
        n:f32[32] = sin m
        o:f32[32] = add n r
      in (o, m) } length=64 linear=(False, False) num_carry=1 num_consts=0 reverse=False unroll=1 _split_transpose=False] c x
  in (u, s, ys) })";

TEST(NativeWorkspace, IntermediatesUseOnePooledWorkspace) {
  Jaxpr j = parse_jaxpr(kProgram);
  CompiledFunction f = compile_native(j, {.opt_level = 0});
  // Following the buffer plan, t is computed straight into output 0 (u = t + 1 updates it
  // in place) and the carry-out o (with n fused into it) into the carry buffer: only the
  // scan body's m (128 B) needs the workspace.
  EXPECT_EQ(f.workspace_bytes(), 128);
  std::vector<RtValue> args{random_array(at(DType::f32, {64, 32}), 1),
                            random_array(at(DType::f32, {32}), 2)};
  std::vector<RtValue> want = interpret(j, args);
  for (int call = 0; call < 3; ++call) {
    std::vector<RtValue> got = f(args);
    for (size_t i = 0; i < got.size(); ++i)
      expect_close(as_array(got[i]), as_array(want[i]), 1e-6, "output " + std::to_string(i));
  }
  EXPECT_EQ(f.workspaces_allocated(), 1);
}

TEST(NativeWorkspace, PlanWithoutWorkspaceAllocatesPerCallAndAgrees) {
  Jaxpr j = parse_jaxpr(kProgram);
  BufferPlan plan = default_buffer_plan(j);
  plan.use_workspace = false;
  EXPECT_NE(emit_mlir(j, {.plan = plan}).find("memref.alloc"), std::string::npos);
  EXPECT_EQ(emit_mlir(j).find("memref.alloc"), std::string::npos);
  CompiledFunction f = compile_native(j, {.opt_level = 0, .plan = plan});
  EXPECT_EQ(f.workspace_bytes(), 0);
  check_text(kProgram,
             {random_array(at(DType::f32, {64, 32}), 1), random_array(at(DType::f32, {32}), 2)},
             1e-6, {.opt_level = 0, .plan = plan});
}

}  // namespace
}  // namespace refjit::testing
