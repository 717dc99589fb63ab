// RUN: relaxmlir-opt %s --relax-gpu-contract | FileCheck %s

// A 50x40 linear (K = 30) with a bias + ReLU epilogue, tagged as relax-schedule-gpu's Matmul
// rule leaves it. One launch: 2x2 blocks of 256 threads, A and B tiles in shared memory (8 x
// 32+4), the first tile read before the K loop and the next one inside it (software
// pipelining), FMAs on the 2x2 register tile, and the epilogue cloned onto each accumulator
// behind a bounds check (50 and 40 are not multiples of 32). The fill, the contraction and the
// epilogue ops are gone.
// CHECK-LABEL: func.func private @linear
// CHECK-NOT: linalg.
// CHECK: gpu.launch blocks({{.*}}) in (%{{.+}} = %c2{{.*}}, %{{.+}} = %c2{{.*}}, %{{.+}} = %c1{{.*}}) threads({{.*}}) in (%{{.+}} = %c256
// CHECK-SAME: workgroup(%[[SA:.+]] : memref<8x36xf32, #gpu.address_space<workgroup>>, %[[SB:.+]] : memref<8x36xf32, #gpu.address_space<workgroup>>)
// CHECK: memref.load %arg0
// CHECK: memref.load %arg1
// CHECK: scf.for %[[K:.+]] = %{{.+}} to %c30{{.*}} step %c8{{.*}} iter_args
// CHECK: memref.store %{{.+}}, %[[SA]]
// CHECK: memref.store %{{.+}}, %[[SB]]
// CHECK: gpu.barrier
// CHECK: memref.load %arg0
// CHECK: memref.load %[[SA]]
// CHECK: math.fma
// CHECK: gpu.barrier
// CHECK: scf.yield
// CHECK: scf.if
// CHECK: %[[BIAS:.+]] = memref.load %arg2
// CHECK: %[[SUM:.+]] = arith.addf %{{.+}}, %[[BIAS]]
// CHECK: %[[RELU:.+]] = arith.maximumf %[[SUM]]
// CHECK: memref.store %[[RELU]], %arg3
// CHECK: gpu.terminator
// CHECK-NOT: linalg.
// CHECK: return
#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(m, n) -> (m, n)>
#col = affine_map<(m, n) -> (n)>
#scalar = affine_map<(m, n) -> ()>
func.func private @linear(%x: memref<50x30xf32>, %w: memref<30x40xf32>, %b: memref<40xf32>, %out: memref<50x40xf32>) attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#scalar, #id], iterator_types = ["parallel", "parallel"]} ins(%zero : f32) outs(%out : memref<50x40xf32>) attrs = {relax.gpu_contract_init} {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  }
  linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : memref<50x30xf32>, memref<30x40xf32>) outs(%out : memref<50x40xf32>) attrs = {relax.gpu_contract = "32x32/2x2"} {
  ^bb0(%a: f32, %c: f32, %acc: f32):
    %p = arith.mulf %a, %c : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#col, #id], iterator_types = ["parallel", "parallel"]} ins(%b : memref<40xf32>) outs(%out : memref<50x40xf32>) attrs = {relax.gpu_contract_epilogue = array<i64: 0, 1>} {
  ^bb0(%bias: f32, %v: f32):
    %s = arith.addf %v, %bias : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  }
  return
}

// Split-K: a 64x64 output with K = 1024 over 2 splits. The tiled kernel's grid z counts the
// splits, each block folds its 512-long K range from zero and stores partial sums to a
// workspace; a second kernel adds the fill's value and both partials (the payload's own addf),
// applies the epilogue and stores. The workspace is freed after it.
// CHECK-LABEL: func.func private @split
// CHECK: %[[W:.+]] = memref.alloc() : memref<2x1x64x64xf32>
// CHECK: gpu.launch blocks({{.*}}) in (%{{.+}} = %c2{{.*}}, %{{.+}} = %c2{{.*}}, %{{.+}} = %c2{{.*}})
// CHECK: arith.minui
// CHECK: scf.for
// CHECK: math.fma
// CHECK: memref.store %{{.+}}, %[[W]]
// CHECK: gpu.terminator
// CHECK: gpu.launch blocks({{.*}}) in (%{{.+}} = %c16{{.*}}, %{{.+}} = %c1{{.*}}, %{{.+}} = %c1{{.*}}) threads({{.*}}) in (%{{.+}} = %c256
// CHECK: memref.load %[[W]]
// CHECK: arith.addf
// CHECK: memref.load %[[W]]
// CHECK: arith.addf
// CHECK: math.tanh
// CHECK: memref.store
// CHECK: gpu.terminator
// CHECK: memref.dealloc %[[W]]
func.func private @split(%x: memref<64x1024xf32>, %w: memref<1024x64xf32>, %out: memref<64x64xf32>) attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#scalar, #id], iterator_types = ["parallel", "parallel"]} ins(%zero : f32) outs(%out : memref<64x64xf32>) attrs = {relax.gpu_contract_init} {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  }
  linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : memref<64x1024xf32>, memref<1024x64xf32>) outs(%out : memref<64x64xf32>) attrs = {relax.gpu_contract = "32x32/2x2", relax.gpu_contract_split = 2 : i64} {
  ^bb0(%a: f32, %c: f32, %acc: f32):
    %p = arith.mulf %a, %c : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%out : memref<64x64xf32>) attrs = {relax.gpu_contract_epilogue = array<i64: 0, 0>} {
  ^bb0(%v: f32):
    %t = math.tanh %v : f32
    linalg.yield %t : f32
  }
  return
}
