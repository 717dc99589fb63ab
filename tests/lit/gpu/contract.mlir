// RUN: relaxmlir-opt %s --relax-gpu-contract | FileCheck %s

// A 50x40 linear (K = 30) with a bias + ReLU epilogue, tagged as relax-schedule-gpu's Matmul
// rule leaves it. One launch: 2x2 blocks of 256 threads, A and B tiles in shared memory (8 x
// 32+4), the first tile read before the K loop and the next one inside it (software
// pipelining), FMAs on the 2x2 register tile, and the epilogue cloned onto each accumulator
// behind a bounds check (50 and 40 are not multiples of 32). Each thread reads its elements by
// strides: their places in the flattened operands are computed once, and each K tile adds one
// offset to all of them. The register tile reads each K row of a shared tile as one vector per
// operand. The fill, the contraction and the epilogue ops are gone.
// CHECK-LABEL: func.func private @linear
// CHECK-NOT: linalg.
// CHECK: gpu.launch blocks({{.*}}) in (%{{.+}} = %c2{{.*}}, %{{.+}} = %c2{{.*}}, %{{.+}} = %c1{{.*}}) threads({{.*}}) in (%{{.+}} = %c256
// CHECK-SAME: workgroup(%[[SA:.+]] : memref<8x36xf32, #gpu.address_space<workgroup>>, %[[SB:.+]] : memref<8x36xf32, #gpu.address_space<workgroup>>)
// CHECK: %[[FA:.+]] = memref.collapse_shape %arg0 {{\[\[}}0, 1]] : memref<50x30xf32> into memref<1500xf32>
// CHECK: %[[FB:.+]] = memref.collapse_shape %arg1 {{\[\[}}0, 1]] : memref<30x40xf32> into memref<1200xf32>
// CHECK: memref.load %[[FA]]
// CHECK: memref.load %[[FB]]
// CHECK: scf.for %[[K:.+]] = %{{.+}} to %c30{{.*}} step %c8{{.*}} iter_args
// CHECK: memref.store %{{.+}}, %[[SA]]
// CHECK: memref.store %{{.+}}, %[[SB]]
// CHECK: gpu.barrier
// CHECK: memref.load %[[FA]]
// CHECK: %[[BSTEP:.+]] = arith.muli %{{.+}}, %c40{{.*}} : index
// CHECK: arith.addi %{{.+}}, %[[BSTEP]] : index
// CHECK: memref.load %[[FB]]
// CHECK: vector.load %[[SA]]{{.*}} : memref<8x36xf32, #gpu.address_space<workgroup>>, vector<2xf32>
// CHECK: vector.load %[[SB]]{{.*}} : memref<8x36xf32, #gpu.address_space<workgroup>>, vector<2xf32>
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

// A convolution (padding 1) whose input is padded as topi writes it and bufferization leaves
// it: a zero-filled buffer and a copy of the image into its interior window. The kernel reads
// the image itself at the shifted index (y - 1, x - 1; one unsigned compare per padded axis
// covers both edges) and the fill's value outside it: the buffer, the fill and the copy are gone.
// K (16 channels x a 3x3 window) runs in tiles of 72 = 8 whole windows, so each staged element
// keeps its window position and its padding test, computed before the K loop; a tile at K
// offset k0 moves every element by the same k0 / 9 channels of 6 x 6 = 36 places.
// CHECK-LABEL: func.func private @padded_conv
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.copy
// CHECK: gpu.launch
// CHECK-SAME: workgroup(%{{.+}} : memref<72x36xf32, #gpu.address_space<workgroup>>, %{{.+}} : memref<72x36xf32, #gpu.address_space<workgroup>>)
// CHECK: %[[FLAT:.+]] = memref.collapse_shape %arg0 {{\[\[}}0, 1, 2, 3]] : memref<1x16x6x6xf32> into memref<576xf32>
// CHECK: %[[Y:.+]] = arith.subi %{{.+}}, %c1
// CHECK: %[[INY:.+]] = arith.cmpi ult, %[[Y]], %c6
// CHECK: %[[X:.+]] = arith.subi %{{.+}}, %c1
// CHECK: %[[INX:.+]] = arith.cmpi ult, %[[X]], %c6
// CHECK: %[[IN:.+]] = arith.andi %[[INY]], %[[INX]]
// CHECK: scf.for %{{.+}} = %{{.+}} to %c144{{.*}} step %c72
// CHECK: gpu.barrier
// CHECK: %[[C:.+]] = arith.divui %{{.+}}, %c9{{.*}} : index
// CHECK: %[[STEP:.+]] = arith.muli %[[C]], %c36{{.*}} : index
// CHECK: %[[AT:.+]] = arith.addi %{{.+}}, %[[STEP]] : index
// CHECK: %[[V:.+]] = memref.load %[[FLAT]][%[[AT]]]
// CHECK: arith.select %[[IN]], %[[V]], %cst
// CHECK: gpu.terminator
// CHECK-NOT: linalg.
// CHECK-NOT: memref.dealloc
// CHECK: return
#pad_scalar = affine_map<(d0, d1, d2, d3) -> ()>
#pad_id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#conv_in = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d4, d2 + d5, d3 + d6)>
#conv_w = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d1, d4, d5, d6)>
#conv_out = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, d3)>
func.func private @padded_conv(%arg0: memref<1x16x6x6xf32>, %arg1: memref<8x16x3x3xf32>, %arg2: memref<1x8x6x6xf32>) attributes {relax.prim_func} {
  %cst = arith.constant 0.000000e+00 : f32
  %alloc = memref.alloc() {alignment = 64 : i64} : memref<1x16x8x8xf32>
  linalg.generic {indexing_maps = [#pad_scalar, #pad_id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%cst : f32) outs(%alloc : memref<1x16x8x8xf32>) attrs = {relax.gpu_contract_pad = 0 : i64} {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  %subview = memref.subview %alloc[0, 0, 1, 1] [1, 16, 6, 6] [1, 1, 1, 1] : memref<1x16x8x8xf32> to memref<1x16x6x6xf32, strided<[1024, 64, 8, 1], offset: 9>>
  memref.copy %arg0, %subview : memref<1x16x6x6xf32> to memref<1x16x6x6xf32, strided<[1024, 64, 8, 1], offset: 9>>
  linalg.generic {indexing_maps = [#pad_scalar, #pad_id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%cst : f32) outs(%arg2 : memref<1x8x6x6xf32>) attrs = {relax.gpu_contract_init} {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.generic {indexing_maps = [#conv_in, #conv_w, #conv_out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%alloc, %arg1 : memref<1x16x8x8xf32>, memref<8x16x3x3xf32>) outs(%arg2 : memref<1x8x6x6xf32>) attrs = {relax.gpu_contract = "32x32/2x2"} {
  ^bb0(%in: f32, %in_0: f32, %out: f32):
    %0 = arith.mulf %in, %in_0 : f32
    %1 = arith.addf %out, %0 : f32
    linalg.yield %1 : f32
  }
  memref.dealloc %alloc : memref<1x16x8x8xf32>
  return
}

// A float16 matmul (40x32 @ 32x24, float32 accumulators, the rounding to float16 as its
// epilogue) on the tensor-core tile: 4 warps; A [M, K] in rows of M (K contiguous: 64 x 32+8),
// B [K, N] in rows of K (N contiguous: 32 x 64+8), each a ring of 2 tiles (K is one tile
// long) in dynamic shared memory (10 KiB for A's ring, then B's: 19 KiB), filled by 16-byte
// cp.async copies (source size 0 past the edges: zeros). The K loop
// waits for its tile, meets at one barrier, requests the next one and computes: fragments by
// ldmatrix x4 (one A fragment, or two B fragments transposed), mma.sync m16n8k16. After it, no copy is left in flight; each
// lane's two adjacent results of a row are rounded and stored as one 4-byte vector behind the
// bounds check (40, 24 < 64; N is even, so a pair never straddles the edge).
// CHECK-LABEL: func.func private @matmul_f16_mma
// CHECK: gpu.launch blocks({{.*}}) in (%{{.+}} = %c1{{.*}}, %{{.+}} = %c1{{.*}}, %{{.+}} = %c1{{.*}}) threads({{.*}}) in (%{{.+}} = %c128
// CHECK-SAME: dynamic_shared_memory_size %c19456_i32
// CHECK: %[[RAW:.+]] = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
// CHECK: %[[SA:.+]] = memref.view %[[RAW]][%c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<2x64x40xf16, #gpu.address_space<workgroup>>
// CHECK: %[[SB:.+]] = memref.view %[[RAW]][%c10240][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<2x32x72xf16, #gpu.address_space<workgroup>>
// CHECK: %[[CA:.+]] = nvgpu.device_async_copy %arg0[{{.*}}], %[[SA]][%c0{{.*}}, {{.*}}], 8, %{{.+}} {bypassL1} : memref<40x32xf16>
// CHECK: %[[CB:.+]] = nvgpu.device_async_copy %arg1[{{.*}}], %[[SB]][%c0{{.*}}, {{.*}}], 8, %{{.+}} {bypassL1} : memref<32x24xf16>
// CHECK: %[[G:.+]] = nvgpu.device_async_create_group %[[CA]], %{{.+}}, %[[CB]]
// CHECK: scf.for
// CHECK: nvgpu.device_async_wait %[[G]] {numGroups = 0 : i32}
// CHECK-NEXT: gpu.barrier
// CHECK: nvgpu.device_async_copy %arg0
// CHECK: nvgpu.device_async_create_group
// CHECK: nvgpu.ldmatrix %[[SA]]{{.*}} {numTiles = 4 : i32, transpose = false}
// CHECK: nvgpu.ldmatrix %[[SB]]{{.*}} {numTiles = 4 : i32, transpose = true}
// CHECK: nvgpu.mma.sync({{.*}}) {mmaShape = [16, 8, 16]} : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
// CHECK: scf.yield
// CHECK: nvgpu.device_async_wait %[[G]] {numGroups = 0 : i32}
// CHECK: scf.if
// CHECK: %[[LO:.+]] = arith.truncf %{{.+}} : f32 to f16
// CHECK: %[[HI:.+]] = arith.truncf %{{.+}} : f32 to f16
// CHECK: %[[PAIR:.+]] = vector.from_elements %[[LO]], %[[HI]] : vector<2xf16>
// CHECK: vector.store %[[PAIR]], %arg2[{{.*}}] {alignment = 4 : i64} : memref<40x24xf16>, vector<2xf16>
// CHECK: gpu.terminator
// CHECK-NOT: linalg.
#mm16_a = affine_map<(m, n, k) -> (m, k)>
#mm16_b = affine_map<(m, n, k) -> (k, n)>
#mm16_c = affine_map<(m, n, k) -> (m, n)>
func.func private @matmul_f16_mma(%arg0: memref<40x32xf16>, %arg1: memref<32x24xf16>, %arg2: memref<40x24xf16>) attributes {relax.prim_func} {
  %cst = arith.constant 0.000000e+00 : f32
  %alloc = memref.alloc() {alignment = 64 : i64} : memref<40x24xf32>
  linalg.generic {indexing_maps = [#scalar, #id], iterator_types = ["parallel", "parallel"]} ins(%cst : f32) outs(%alloc : memref<40x24xf32>) attrs = {relax.gpu_contract_init} {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.generic {indexing_maps = [#mm16_a, #mm16_b, #mm16_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%arg0, %arg1 : memref<40x32xf16>, memref<32x24xf16>) outs(%alloc : memref<40x24xf32>) attrs = {relax.gpu_contract = "mma64x64/32x32"} {
  ^bb0(%in: f16, %in_0: f16, %out: f32):
    %0 = arith.extf %in : f16 to f32
    %1 = arith.extf %in_0 : f16 to f32
    %2 = arith.mulf %0, %1 : f32
    %3 = arith.addf %out, %2 : f32
    linalg.yield %3 : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%alloc : memref<40x24xf32>) outs(%arg2 : memref<40x24xf16>) attrs = {relax.gpu_contract_epilogue = array<i64: 0, 0>} {
  ^bb0(%in: f32, %out: f16):
    %0 = arith.truncf %in : f32 to f16
    linalg.yield %0 : f16
  }
  memref.dealloc %alloc : memref<40x24xf32>
  return
}

// -----

// The same float16 matmul on Hopper's warpgroup MMA (the sm_90a tile): one warpgroup of 128
// threads per 128x128 block; A and B copied by cp.async (16 bytes, zeros past the edges: 200 is
// not a multiple of 128, K = 72 not one of 64) into a ring of shared tiles in the 128-byte
// swizzled layout (chunk XOR row % 8), from a base rounded up to 1024 bytes; each K step waits
// for its tile, fences it for the async proxy, meets the block and issues the warpgroup MMA (B
// read transposed), which waits for the previous step's group (its default waitGroup, 1)
// before that slot is refilled.
// The accumulators go through shared memory to the paired f16 stores.
// CHECK-LABEL: func.func private @matmul_f16_wgmma
// CHECK-NOT: linalg.
// CHECK: gpu.launch
// CHECK-SAME: threads(%{{.+}}, %{{.+}}, %{{.+}}) in (%{{.+}} = %c128
// CHECK: gpu.dynamic_shared_memory
// CHECK: memref.extract_aligned_pointer_as_index
// CHECK: arith.xori
// CHECK: nvgpu.device_async_copy {{.+}} : memref<200x72xf16> to memref<128x64xf16, #gpu.address_space<workgroup>>
// CHECK: nvgpu.device_async_copy {{.+}} : memref<72x136xf16> to memref<2x64x64xf16, #gpu.address_space<workgroup>>
// CHECK: nvgpu.warpgroup.mma.init.accumulator
// CHECK: scf.for
// CHECK: nvgpu.device_async_wait
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK: gpu.barrier
// CHECK: nvgpu.warpgroup.generate.descriptor
// CHECK: nvgpu.warpgroup.generate.descriptor
// CHECK: nvgpu.warpgroup.mma {{.+}} {transposeB} :
// CHECK: nvgpu.device_async_create_group
// CHECK: nvgpu.device_async_wait %{{.+}} {numGroups = 0 : i32}
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: nvgpu.warpgroup.mma.store
// CHECK: vector.store {{.+}} : memref<200x136xf16>, vector<2xf16>
// CHECK: gpu.terminator
// CHECK-NOT: linalg.
func.func private @matmul_f16_wgmma(%arg0: memref<200x72xf16>, %arg1: memref<72x136xf16>, %arg2: memref<200x136xf16>) attributes {relax.prim_func} {
  %cst = arith.constant 0.000000e+00 : f32
  %alloc = memref.alloc() {alignment = 64 : i64} : memref<200x136xf32>
  linalg.generic {indexing_maps = [#scalar, #id], iterator_types = ["parallel", "parallel"]} ins(%cst : f32) outs(%alloc : memref<200x136xf32>) attrs = {relax.gpu_contract_init} {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.generic {indexing_maps = [#mm16_a, #mm16_b, #mm16_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%arg0, %arg1 : memref<200x72xf16>, memref<72x136xf16>) outs(%alloc : memref<200x136xf32>) attrs = {relax.gpu_contract = "wgmma128x128"} {
  ^bb0(%in: f16, %in_0: f16, %out: f32):
    %0 = arith.extf %in : f16 to f32
    %1 = arith.extf %in_0 : f16 to f32
    %2 = arith.mulf %0, %1 : f32
    %3 = arith.addf %out, %2 : f32
    linalg.yield %3 : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%alloc : memref<200x136xf32>) outs(%arg2 : memref<200x136xf16>) attrs = {relax.gpu_contract_epilogue = array<i64: 0, 0>} {
  ^bb0(%in: f32, %out: f16):
    %0 = arith.truncf %in : f32 to f16
    linalg.yield %0 : f16
  }
  memref.dealloc %alloc : memref<200x136xf32>
  return
}

// -----

// wgmma reads B by K rows only: a B with K contiguous (x @ w^T) gets the mma.sync kernel of
// the same 128x128 block tile (8 warps of 64x32).
// CHECK-LABEL: func.func private @matmul_f16_wgmma_b_by_columns
// CHECK-NOT: nvgpu.warpgroup
// CHECK: nvgpu.mma.sync
// CHECK-NOT: nvgpu.warpgroup
#mm16_bt = affine_map<(m, n, k) -> (n, k)>
func.func private @matmul_f16_wgmma_b_by_columns(%arg0: memref<200x72xf16>, %arg1: memref<136x72xf16>, %arg2: memref<200x136xf32>) attributes {relax.prim_func} {
  %cst = arith.constant 0.000000e+00 : f32
  linalg.generic {indexing_maps = [#scalar, #id], iterator_types = ["parallel", "parallel"]} ins(%cst : f32) outs(%arg2 : memref<200x136xf32>) attrs = {relax.gpu_contract_init} {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.generic {indexing_maps = [#mm16_a, #mm16_bt, #mm16_c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%arg0, %arg1 : memref<200x72xf16>, memref<136x72xf16>) outs(%arg2 : memref<200x136xf32>) attrs = {relax.gpu_contract = "wgmma128x128"} {
  ^bb0(%in: f16, %in_0: f16, %out: f32):
    %0 = arith.extf %in : f16 to f32
    %1 = arith.extf %in_0 : f16 to f32
    %2 = arith.mulf %0, %1 : f32
    %3 = arith.addf %out, %2 : f32
    linalg.yield %3 : f32
  }
  return
}
