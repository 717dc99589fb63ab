// The cuda row of lowering/pipelines.py, stage by stage: blocks and threads (schedule), one
// gpu.launch per kernel (map), gpu.module + launch_func with device buffers on the host side
// (outline), NVVM with libdevice math (nvvm), and PTX for the target's arch with its PTX version.
// RUN: relaxmlir-opt %s --pipeline=cuda --mlir-print-ir-after-all 2>&1 >/dev/null \
// RUN:   | FileCheck %s --check-prefixes=SCHED,MAP,OUTLINE,NVVM
// RUN: relaxmlir-opt %s --pipeline=cuda | FileCheck %s --check-prefix=PTX

// SCHED-LABEL: IR Dump After relax-schedule-gpu
// SCHED: func.func private @add({{.*}}relax.gpu_block_dims = array<i64: 256, 1, 1>
// SCHED: } {mapping = [#gpu.thread<y>, #gpu.thread<x>]}
// SCHED: } {mapping = [#gpu.block<y>, #gpu.block<x>]}

// MAP-LABEL: IR Dump After relax-gpu-map
// MAP: func.func private @add(
// MAP-NOT: scf.forall
// MAP: gpu.launch blocks(%[[BX:.+]], %[[BY:.+]], %{{.+}}) in (%{{.+}} = %{{.+}}, %{{.+}} = %{{.+}}, %{{.+}} = %{{.+}}) threads(%[[TX:.+]], %{{.+}}, %{{.+}}) in
// MAP: gpu.terminator

// OUTLINE-LABEL: IR Dump After relax-gpu-host-memory
// OUTLINE: gpu.launch_func @[[ADD:add_kernel]]::@add_kernel blocks in (%{{.+}}, %{{.+}}, %{{.+}}) threads in (%{{.+}}, %{{.+}}, %{{.+}})
// OUTLINE: gpu.module @[[ADD]]
// OUTLINE: gpu.func @add_kernel({{.*}}) kernel attributes {known_block_size = array<i32: 256, 1, 1>
// OUTLINE: gpu.block_id x
// OUTLINE: gpu.thread_id x
// OUTLINE: func.func @main
// OUTLINE: %[[TOKEN:.+]] = gpu.wait async
// OUTLINE: gpu.alloc async [%[[TOKEN]]] () : memref<64x1024xf32>
// OUTLINE-NOT: memref.alloc
// OUTLINE: gpu.dealloc async

// NVVM-LABEL: IR Dump After GpuToLLVMConversionPass
// NVVM: gpu.module @add_kernel [#nvvm.target<O = 3, chip = "sm_90", features = "+ptx80">]
// NVVM: llvm.func @add_kernel({{.*}}) attributes {gpu.kernel, {{.*}}nvvm.kernel
// NVVM: nvvm.read.ptx.sreg.ctaid.x
// NVVM: nvvm.read.ptx.sreg.tid.x
// NVVM: gpu.module @act_kernel
// NVVM-DAG: llvm.call @__nv_expf
// NVVM-DAG: llvm.call @__nv_tanhf
// NVVM-DAG: llvm.call @__nv_erff

// One .entry per kernel, for sm_90 with PTX ISA 8.0; the host code allocates through the
// runtime's mgpu* calls, and launches stay gpu.launch_func until LLVM IR translation.
// PTX: llvm.func @main(
// PTX: llvm.call @mgpuMemAlloc
// PTX: llvm.call @add(
// PTX: llvm.call @mgpuMemFree
// PTX: llvm.func @add(
// PTX: gpu.launch_func @add_kernel::@add_kernel
// PTX: gpu.binary @add_kernel  [#gpu.object<#nvvm.target<O = 3, chip = "sm_90", features = "+ptx80">
// PTX-SAME: .version 8.0\0A.target sm_90
// PTX-SAME: .visible .entry add_kernel(
// PTX: gpu.binary @act_kernel
// PTX-SAME: .visible .entry act_kernel(
// PTX-SAME: ex2.approx

module {
  func.func @main(%x: tensor<64x1024xf32> {relax.name = "x"}, %y: tensor<64x1024xf32> {relax.name = "y"}) -> tensor<64x1024xf32> attributes {relax.function} {
    %0 = "relax.call_tir"(%x, %y) {callee = @add} : (tensor<64x1024xf32>, tensor<64x1024xf32>) -> tensor<64x1024xf32>
    %1 = "relax.call_tir"(%0) {callee = @act} : (tensor<64x1024xf32>) -> tensor<64x1024xf32>
    return %1 : tensor<64x1024xf32>
  }
  func.func private @add(%a: tensor<64x1024xf32>, %b: tensor<64x1024xf32>, %out: tensor<64x1024xf32>) -> tensor<64x1024xf32> attributes {relax.prim_func} {
    %0 = linalg.add ins(%a, %b : tensor<64x1024xf32>, tensor<64x1024xf32>) outs(%out : tensor<64x1024xf32>) -> tensor<64x1024xf32>
    return %0 : tensor<64x1024xf32>
  }
  // exp(a) + tanh(a) + erf(a): the math functions come from libdevice, linked by MLIR.
  func.func private @act(%a: tensor<64x1024xf32>, %out: tensor<64x1024xf32>) -> tensor<64x1024xf32> attributes {relax.prim_func} {
    %0 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%a : tensor<64x1024xf32>) outs(%out : tensor<64x1024xf32>) {
    ^bb0(%v: f32, %o: f32):
      %e = math.exp %v : f32
      %t = math.tanh %v : f32
      %r = math.erf %v : f32
      %s = arith.addf %e, %t : f32
      %u = arith.addf %s, %r : f32
      linalg.yield %u : f32
    } -> tensor<64x1024xf32>
    return %0 : tensor<64x1024xf32>
  }
}
