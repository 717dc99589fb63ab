// RUN: relaxmlir-opt %s --relax-fuse-ops -split-input-file | FileCheck %s
// RUN: relaxmlir-opt %s --relax-fuse-ops --relax-fuse-tir --symbol-dce -split-input-file | FileCheck %s --check-prefix=TIR
// RUN: relaxmlir-opt %s -split-input-file --pass-pipeline='builtin.module(relax-fuse-ops,relax-fuse-tir,symbol-dce,relax-inline-dataflow,relax-graph-to-memref,relax-prim-func-dps,eliminate-empty-tensors,one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map},canonicalize,drop-equivalent-buffer-results)' | FileCheck %s --check-prefix=BUF

#mk = affine_map<(d0, d1, d2) -> (d0, d2)>
#kn = affine_map<(d0, d1, d2) -> (d2, d1)>
#mn = affine_map<(d0, d1, d2) -> (d0, d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>

func.func private @matmul(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %out: tensor<4x16xf32>) -> tensor<4x16xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %init = linalg.fill ins(%zero : f32) outs(%out : tensor<4x16xf32>) -> tensor<4x16xf32>
  %r = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%init : tensor<4x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}
func.func private @bias_add(%x: tensor<4x16xf32>, %b: tensor<16xf32>, %out: tensor<4x16xf32>) -> tensor<4x16xf32> attributes {relax.prim_func} {
  %r = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %b : tensor<4x16xf32>, tensor<16xf32>) outs(%out : tensor<4x16xf32>) {
  ^bb0(%u: f32, %v: f32, %o: f32):
    %s = arith.addf %u, %v : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}
func.func private @relu(%x: tensor<4x16xf32>, %out: tensor<4x16xf32>) -> tensor<4x16xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x16xf32>) outs(%out : tensor<4x16xf32>) {
  ^bb0(%u: f32, %o: f32):
    %m = arith.maximumf %u, %zero : f32
    linalg.yield %m : f32
  } -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

// CHECK-LABEL: func.func @matmul_bias_relu
// CHECK: "relax.call_tir"({{.*}}) {callee = @matmul, relax.fuse_group = "[[G:fused_[0-9]+]]"}
// CHECK: "relax.call_tir"({{.*}}) {callee = @bias_add, relax.fuse_group = "[[G]]"}
// CHECK: "relax.call_tir"({{.*}}) {callee = @relu, relax.fuse_group = "[[G]]"}

// TIR-LABEL: func.func private @fused_matmul_bias_add_relu
// TIR-SAME: (%[[A:.+]]: tensor<4x8xf32>, %[[B:.+]]: tensor<8x16xf32>, %[[BIAS:.+]]: tensor<16xf32>, %[[OUT:.+]]: tensor<4x16xf32>)
// TIR: %[[MM:.+]] = linalg.generic {{.*}}["parallel", "parallel", "reduction"]
// The epilogue (bias + relu, one generic) updates the matmul result in place: no new tensor.
// TIR: linalg.generic {{.*}}["parallel", "parallel"]} ins(%[[BIAS]] : tensor<16xf32>) outs(%[[MM]] : tensor<4x16xf32>)
// TIR: arith.addf
// TIR: arith.maximumf
// TIR-NOT: linalg.generic
// TIR-LABEL: func.func @matmul_bias_relu
// TIR: %[[Y:.+]] = "relax.call_tir"(%{{.+}}, %{{.+}}, %{{.+}}) {callee = @fused_matmul_bias_add_relu}
// TIR-NEXT: scf.yield %[[Y]]
// TIR-NOT: func.func private @relu

// Bufferized, the fused kernel writes only its out-argument: no intermediate buffer.
// BUF-LABEL: func.func private @fused_matmul_bias_add_relu
// BUF-SAME: (%{{[^:]+}}: memref<4x8xf32>, %{{[^:]+}}: memref<8x16xf32>, %{{[^:]+}}: memref<16xf32>, %[[OUT:[^:]+]]: memref<4x16xf32>)
// BUF-NOT: memref.alloc
// BUF: linalg.fill ins(%{{.+}} : f32) outs(%[[OUT]] : memref<4x16xf32>)
// BUF-NOT: memref.alloc
// BUF: return
func.func @matmul_bias_relu(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %bias: tensor<16xf32>) -> tensor<4x16xf32> attributes {relax.function} {
  %r = scf.execute_region -> tensor<4x16xf32> no_inline {
    %0 = "relax.call_tir"(%a, %b) {callee = @matmul} : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %1 = "relax.call_tir"(%0, %bias) {callee = @bias_add} : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
    %2 = "relax.call_tir"(%1) {callee = @relu} : (tensor<4x16xf32>) -> tensor<4x16xf32>
    scf.yield %2 : tensor<4x16xf32>
  } {relax.dataflow}
  return %r : tensor<4x16xf32>
}

// -----

#id = affine_map<(d0) -> (d0)>
func.func private @neg(%x: tensor<8xf32>, %out: tensor<8xf32>) -> tensor<8xf32> attributes {relax.prim_func} {
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%x : tensor<8xf32>) outs(%out : tensor<8xf32>) {
  ^bb0(%u: f32, %o: f32):
    %n = arith.negf %u : f32
    linalg.yield %n : f32
  } -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// A result used twice is not fused: each consumer would recompute it.
// CHECK-LABEL: func.func @shared_result
// CHECK-NOT: relax.fuse_group
// TIR-LABEL: func.func @shared_result
// TIR-COUNT-3: callee = @neg
func.func @shared_result(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) attributes {relax.function} {
  %r:2 = scf.execute_region -> (tensor<8xf32>, tensor<8xf32>) no_inline {
    %0 = "relax.call_tir"(%x) {callee = @neg} : (tensor<8xf32>) -> tensor<8xf32>
    %1 = "relax.call_tir"(%0) {callee = @neg} : (tensor<8xf32>) -> tensor<8xf32>
    %2 = "relax.call_tir"(%0) {callee = @neg} : (tensor<8xf32>) -> tensor<8xf32>
    scf.yield %1, %2 : tensor<8xf32>, tensor<8xf32>
  } {relax.dataflow}
  return %r#0, %r#1 : tensor<8xf32>, tensor<8xf32>
}

// -----

#mk = affine_map<(d0, d1, d2) -> (d0, d2)>
#kn = affine_map<(d0, d1, d2) -> (d2, d1)>
#mn = affine_map<(d0, d1, d2) -> (d0, d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func private @matmul(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %out: tensor<4x16xf32>) -> tensor<4x16xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %init = linalg.fill ins(%zero : f32) outs(%out : tensor<4x16xf32>) -> tensor<4x16xf32>
  %r = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%init : tensor<4x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}
func.func private @tanh(%x: tensor<4x16xf32>, %out: tensor<4x16xf32>) -> tensor<4x16xf32> attributes {relax.prim_func} {
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x16xf32>) outs(%out : tensor<4x16xf32>) {
  ^bb0(%u: f32, %o: f32):
    %t = math.tanh %u : f32
    linalg.yield %t : f32
  } -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}
func.func private @mul(%x: tensor<4x16xf32>, %y: tensor<4x16xf32>, %out: tensor<4x16xf32>) -> tensor<4x16xf32> attributes {relax.prim_func} {
  %r = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %y : tensor<4x16xf32>, tensor<4x16xf32>) outs(%out : tensor<4x16xf32>) {
  ^bb0(%u: f32, %v: f32, %o: f32):
    %p = arith.mulf %u, %v : f32
    linalg.yield %p : f32
  } -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

// A result read by several ops of one chain (x * tanh(x), as in GELU) joins that chain: the
// matmul and its whole epilogue are one kernel, the epilogue one generic.
// CHECK-LABEL: func.func @matmul_x_tanh_x
// CHECK: "relax.call_tir"({{.*}}) {callee = @matmul, relax.fuse_group = "[[G:fused_[0-9]+]]"}
// CHECK: "relax.call_tir"({{.*}}) {callee = @tanh, relax.fuse_group = "[[G]]"}
// CHECK: "relax.call_tir"({{.*}}) {callee = @mul, relax.fuse_group = "[[G]]"}

// TIR-LABEL: func.func private @fused_matmul_tanh_mul
// TIR: %[[MM:.+]] = linalg.generic {{.*}}["parallel", "parallel", "reduction"]
// TIR: linalg.generic {{.*}}["parallel", "parallel"]} outs(%[[MM]] : tensor<4x16xf32>)
// TIR: math.tanh
// TIR: arith.mulf
// TIR-NOT: linalg.generic
// TIR-LABEL: func.func @matmul_x_tanh_x
// TIR: "relax.call_tir"(%{{.+}}, %{{.+}}) {callee = @fused_matmul_tanh_mul}
// TIR-NOT: relax.call_tir
func.func @matmul_x_tanh_x(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> attributes {relax.function} {
  %r = scf.execute_region -> tensor<4x16xf32> no_inline {
    %0 = "relax.call_tir"(%a, %b) {callee = @matmul} : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %1 = "relax.call_tir"(%0) {callee = @tanh} : (tensor<4x16xf32>) -> tensor<4x16xf32>
    %2 = "relax.call_tir"(%0, %1) {callee = @mul} : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
    scf.yield %2 : tensor<4x16xf32>
  } {relax.dataflow}
  return %r : tensor<4x16xf32>
}

// -----

#mk = affine_map<(d0, d1, d2) -> (d0, d2)>
#kn = affine_map<(d0, d1, d2) -> (d2, d1)>
#mn = affine_map<(d0, d1, d2) -> (d0, d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
func.func private @matmul(%a: tensor<?x8xf32>, %b: tensor<8x16xf32>, %out: tensor<?x16xf32>) -> tensor<?x16xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %init = linalg.fill ins(%zero : f32) outs(%out : tensor<?x16xf32>) -> tensor<?x16xf32>
  %r = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : tensor<?x8xf32>, tensor<8x16xf32>) outs(%init : tensor<?x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<?x16xf32>
  return %r : tensor<?x16xf32>
}
func.func private @transpose(%x: tensor<?x16xf32>, %out: tensor<16x?xf32>) -> tensor<16x?xf32> attributes {relax.prim_func} {
  %r = linalg.generic {indexing_maps = [#tr, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<?x16xf32>) outs(%out : tensor<16x?xf32>) {
  ^bb0(%u: f32, %o: f32):
    linalg.yield %u : f32
  } -> tensor<16x?xf32>
  return %r : tensor<16x?xf32>
}

// Over a symbolic row count `n`, a matmul and the transpose after it fuse although the
// intermediate ([n, 16]) and the output ([16, n]) differ in type: the intermediate's symbol is
// one of the output's sizes (relax.shape), so the fused kernel sizes it from its out-argument.
// (A head split over a symbolic sequence stays in its matmul's epilogue this way.)
// CHECK-LABEL: func.func @symbolic_matmul_transpose
// CHECK: "relax.call_tir"({{.*}}) {callee = @matmul, relax.fuse_group = "[[G:fused_[0-9]+]]"
// CHECK: "relax.call_tir"({{.*}}) {callee = @transpose, relax.fuse_group = "[[G]]"

// TIR-LABEL: func.func private @fused_matmul_transpose
// TIR-SAME: %[[OUT:[a-z0-9_]+]]: tensor<16x?xf32>)
// TIR: %[[N:.+]] = tensor.dim %[[OUT]], %c1 : tensor<16x?xf32>
// TIR: tensor.empty(%[[N]]) : tensor<?x16xf32>
// TIR-LABEL: func.func @symbolic_matmul_transpose
// TIR: "relax.call_tir"(%{{.+}}, %{{.+}}) {callee = @fused_matmul_transpose, relax.shape = {{\[\[}}16, "n"]]}
// TIR-NOT: relax.call_tir
func.func @symbolic_matmul_transpose(%a: tensor<?x8xf32> {relax.shape = ["n", 8]}, %b: tensor<8x16xf32>) -> tensor<16x?xf32> attributes {relax.function} {
  %r = scf.execute_region -> tensor<16x?xf32> no_inline {
    %0 = "relax.call_tir"(%a, %b) {callee = @matmul, relax.shape = [["n", 16]]} : (tensor<?x8xf32>, tensor<8x16xf32>) -> tensor<?x16xf32>
    %1 = "relax.call_tir"(%0) {callee = @transpose, relax.shape = [[16, "n"]]} : (tensor<?x16xf32>) -> tensor<16x?xf32>
    scf.yield %1 : tensor<16x?xf32>
  } {relax.dataflow}
  return %r : tensor<16x?xf32>
}

// -----

#b0 = affine_map<(d0, d1, d2) -> (0, d1, d2)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#in4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#out4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>

// TE reads the batch axis of a batch-of-one operand at index 0. The loop over that axis has
// extent 1 too, so `x * x` is elementwise (not injective) and fuses into the sum after it, as
// the same op over a 2-D tensor does: Llama's RMSNorm prologue.
func.func private @square(%x: tensor<1x4x8xf32>, %out: tensor<1x4x8xf32>) -> tensor<1x4x8xf32> attributes {relax.prim_func} {
  %r = linalg.generic {indexing_maps = [#b0, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x : tensor<1x4x8xf32>) outs(%out : tensor<1x4x8xf32>) {
  ^bb0(%u: f32, %o: f32):
    %m = arith.mulf %u, %u : f32
    linalg.yield %m : f32
  } -> tensor<1x4x8xf32>
  return %r : tensor<1x4x8xf32>
}
func.func private @row_sum(%x: tensor<1x4x8xf32>, %out: tensor<1x4x1xf32>) -> tensor<1x4x1xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %init = linalg.fill ins(%zero : f32) outs(%out : tensor<1x4x1xf32>) -> tensor<1x4x1xf32>
  %r = linalg.generic {indexing_maps = [#in4, #out4], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%x : tensor<1x4x8xf32>) outs(%init : tensor<1x4x1xf32>) {
  ^bb0(%u: f32, %acc: f32):
    %s = arith.addf %acc, %u : f32
    linalg.yield %s : f32
  } -> tensor<1x4x1xf32>
  return %r : tensor<1x4x1xf32>
}

// CHECK-LABEL: func.func @square_then_sum
// CHECK: "relax.call_tir"({{.*}}) {callee = @square, relax.fuse_group = "[[G:fused_[0-9]+]]"}
// CHECK: "relax.call_tir"({{.*}}) {callee = @row_sum, relax.fuse_group = "[[G]]"}
// TIR-LABEL: func.func @square_then_sum
// TIR: "relax.call_tir"(%{{.+}}) {callee = @fused_square_row_sum}
// TIR-NOT: relax.call_tir
func.func @square_then_sum(%x: tensor<1x4x8xf32>) -> tensor<1x4x1xf32> attributes {relax.function} {
  %r = scf.execute_region -> tensor<1x4x1xf32> no_inline {
    %0 = "relax.call_tir"(%x) {callee = @square} : (tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
    %1 = "relax.call_tir"(%0) {callee = @row_sum} : (tensor<1x4x8xf32>) -> tensor<1x4x1xf32>
    scf.yield %1 : tensor<1x4x1xf32>
  } {relax.dataflow}
  return %r : tensor<1x4x1xf32>
}

// -----

// TE's depthwise / grouped NCHW convolution reads its image with tensor.extract at computed
// indices: the image counts as a second input, so the op is a contraction (an epilogue joins
// it, as after any conv) rather than a reduction that the bias would leave behind.
#w = affine_map<(c, x, k) -> (c, k)>
#o = affine_map<(c, x, k) -> (c, x)>
#id2 = affine_map<(c, x) -> (c, x)>
#ch = affine_map<(c, x) -> (c)>
func.func private @depthwise(%w: tensor<6x3xf32>, %img: tensor<6x10xf32>, %out: tensor<6x8xf32>) -> tensor<6x8xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %init = linalg.fill ins(%zero : f32) outs(%out : tensor<6x8xf32>) -> tensor<6x8xf32>
  %r = linalg.generic {indexing_maps = [#w, #o], iterator_types = ["parallel", "parallel", "reduction"]} ins(%w : tensor<6x3xf32>) outs(%init : tensor<6x8xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %c = linalg.index 0 : index
    %x = linalg.index 1 : index
    %k = linalg.index 2 : index
    %i = arith.addi %x, %k : index
    %p = tensor.extract %img[%c, %i] : tensor<6x10xf32>
    %m = arith.mulf %p, %v : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<6x8xf32>
  return %r : tensor<6x8xf32>
}
func.func private @channel_bias(%x: tensor<6x8xf32>, %b: tensor<6xf32>, %out: tensor<6x8xf32>) -> tensor<6x8xf32> attributes {relax.prim_func} {
  %r = linalg.generic {indexing_maps = [#id2, #ch, #id2], iterator_types = ["parallel", "parallel"]} ins(%x, %b : tensor<6x8xf32>, tensor<6xf32>) outs(%out : tensor<6x8xf32>) {
  ^bb0(%u: f32, %v: f32, %o: f32):
    %s = arith.addf %u, %v : f32
    linalg.yield %s : f32
  } -> tensor<6x8xf32>
  return %r : tensor<6x8xf32>
}

// CHECK-LABEL: func.func @depthwise_bias
// CHECK: "relax.call_tir"({{.*}}) {callee = @depthwise, relax.fuse_group = "[[G:fused_[0-9]+]]"}
// CHECK: "relax.call_tir"({{.*}}) {callee = @channel_bias, relax.fuse_group = "[[G]]"}
// TIR-LABEL: func.func @depthwise_bias
// TIR: "relax.call_tir"(%{{.+}}) {callee = @fused_depthwise_channel_bias}
// TIR-NOT: relax.call_tir
func.func @depthwise_bias(%w: tensor<6x3xf32>, %img: tensor<6x10xf32>, %b: tensor<6xf32>) -> tensor<6x8xf32> attributes {relax.function} {
  %r = scf.execute_region -> tensor<6x8xf32> no_inline {
    %0 = "relax.call_tir"(%w, %img) {callee = @depthwise} : (tensor<6x3xf32>, tensor<6x10xf32>) -> tensor<6x8xf32>
    %1 = "relax.call_tir"(%0, %b) {callee = @channel_bias} : (tensor<6x8xf32>, tensor<6xf32>) -> tensor<6x8xf32>
    scf.yield %1 : tensor<6x8xf32>
  } {relax.dataflow}
  return %r : tensor<6x8xf32>
}

// -----

// A squeeze-excite gate: the sigmoid of a [1, 16, 1, 1] scale, broadcast by the multiply over
// the 16 x 4 x 4 image. Fusion groups both, but FuseTIR keeps the sigmoid its own generic over
// the 16 scale values: inlined into the multiply, its exp was computed for each of the 256
// elements the multiply writes (RegNetY-1.6GF: 73 us per block).
#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#chan = affine_map<(d0, d1, d2, d3) -> (d0, d1, 0, 0)>
func.func private @sigmoid(%x: tensor<1x16x1x1xf32>, %out: tensor<1x16x1x1xf32>) -> tensor<1x16x1x1xf32> attributes {relax.prim_func} {
  %one = arith.constant 1.0 : f32
  %r = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x : tensor<1x16x1x1xf32>) outs(%out : tensor<1x16x1x1xf32>) {
  ^bb0(%u: f32, %o: f32):
    %n = arith.negf %u : f32
    %e = math.exp %n : f32
    %d = arith.addf %e, %one : f32
    %s = arith.divf %one, %d : f32
    linalg.yield %s : f32
  } -> tensor<1x16x1x1xf32>
  return %r : tensor<1x16x1x1xf32>
}
func.func private @scale(%x: tensor<1x16x4x4xf32>, %g: tensor<1x16x1x1xf32>, %out: tensor<1x16x4x4xf32>) -> tensor<1x16x4x4xf32> attributes {relax.prim_func} {
  %r = linalg.generic {indexing_maps = [#id4, #chan, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x, %g : tensor<1x16x4x4xf32>, tensor<1x16x1x1xf32>) outs(%out : tensor<1x16x4x4xf32>) {
  ^bb0(%u: f32, %v: f32, %o: f32):
    %m = arith.mulf %u, %v : f32
    linalg.yield %m : f32
  } -> tensor<1x16x4x4xf32>
  return %r : tensor<1x16x4x4xf32>
}

// CHECK-LABEL: func.func @excite
// CHECK: "relax.call_tir"({{.*}}) {callee = @sigmoid, relax.fuse_group = "[[G:fused_[0-9]+]]"}
// CHECK: "relax.call_tir"({{.*}}) {callee = @scale, relax.fuse_group = "[[G]]"}

// TIR-LABEL: func.func private @fused_sigmoid_scale
// TIR: %[[GATE:.+]] = linalg.generic {{.*}} outs(%{{.+}} : tensor<1x16x1x1xf32>)
// TIR: math.exp
// TIR: linalg.generic {{.*}} ins(%{{.+}}, %[[GATE]] : {{.*}}) outs(%{{.+}} : tensor<1x16x4x4xf32>)
// TIR-NOT: math.exp
// TIR: arith.mulf
// TIR-NOT: math.exp
// TIR: return
func.func @excite(%x: tensor<1x16x4x4xf32>, %s: tensor<1x16x1x1xf32>) -> tensor<1x16x4x4xf32> attributes {relax.function} {
  %r = scf.execute_region -> tensor<1x16x4x4xf32> no_inline {
    %0 = "relax.call_tir"(%s) {callee = @sigmoid} : (tensor<1x16x1x1xf32>) -> tensor<1x16x1x1xf32>
    %1 = "relax.call_tir"(%x, %0) {callee = @scale} : (tensor<1x16x4x4xf32>, tensor<1x16x1x1xf32>) -> tensor<1x16x4x4xf32>
    scf.yield %1 : tensor<1x16x4x4xf32>
  } {relax.dataflow}
  return %r : tensor<1x16x4x4xf32>
}

// -----

// A transpose feeding only the B of a one-row contraction (a decode step's q @ K^T over its KV
// cache) joins the contraction, so no kernel writes K^T; in front of an 8-row contraction it
// stays a kernel of its own (there the product packs B anyway).
#kt = affine_map<(d0, d1) -> (d1, d0)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#qk = affine_map<(d0, d1, d2) -> (d0, d2)>
#kn2 = affine_map<(d0, d1, d2) -> (d2, d1)>
#mn2 = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func private @transpose(%k: tensor<32x16xf32>, %out: tensor<16x32xf32>) -> tensor<16x32xf32> attributes {relax.prim_func} {
  %r = linalg.generic {indexing_maps = [#kt, #id2], iterator_types = ["parallel", "parallel"]} ins(%k : tensor<32x16xf32>) outs(%out : tensor<16x32xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  } -> tensor<16x32xf32>
  return %r : tensor<16x32xf32>
}
func.func private @scores1(%q: tensor<1x16xf32>, %kt: tensor<16x32xf32>, %out: tensor<1x32xf32>) -> tensor<1x32xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %init = linalg.fill ins(%zero : f32) outs(%out : tensor<1x32xf32>) -> tensor<1x32xf32>
  %r = linalg.generic {indexing_maps = [#qk, #kn2, #mn2], iterator_types = ["parallel", "parallel", "reduction"]} ins(%q, %kt : tensor<1x16xf32>, tensor<16x32xf32>) outs(%init : tensor<1x32xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<1x32xf32>
  return %r : tensor<1x32xf32>
}
func.func private @scores8(%q: tensor<8x16xf32>, %kt: tensor<16x32xf32>, %out: tensor<8x32xf32>) -> tensor<8x32xf32> attributes {relax.prim_func} {
  %zero = arith.constant 0.0 : f32
  %init = linalg.fill ins(%zero : f32) outs(%out : tensor<8x32xf32>) -> tensor<8x32xf32>
  %r = linalg.generic {indexing_maps = [#qk, #kn2, #mn2], iterator_types = ["parallel", "parallel", "reduction"]} ins(%q, %kt : tensor<8x16xf32>, tensor<16x32xf32>) outs(%init : tensor<8x32xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<8x32xf32>
  return %r : tensor<8x32xf32>
}

// CHECK-LABEL: func.func @decode_scores
// CHECK: "relax.call_tir"({{.*}}) {callee = @transpose, relax.fuse_group = "[[G:fused_[0-9]+]]"}
// CHECK: "relax.call_tir"({{.*}}) {callee = @scores1, relax.fuse_group = "[[G]]"}
// TIR-LABEL: func.func private @fused_transpose_scores1
// TIR-LABEL: func.func @decode_scores
// TIR-NEXT: scf.execute_region
// TIR-NEXT: "relax.call_tir"(%{{.+}}, %{{.+}}) {callee = @fused_transpose_scores1}
// TIR-NEXT: scf.yield
func.func @decode_scores(%q: tensor<1x16xf32>, %k: tensor<32x16xf32>) -> tensor<1x32xf32> attributes {relax.function} {
  %r = scf.execute_region -> tensor<1x32xf32> no_inline {
    %0 = "relax.call_tir"(%k) {callee = @transpose} : (tensor<32x16xf32>) -> tensor<16x32xf32>
    %1 = "relax.call_tir"(%q, %0) {callee = @scores1} : (tensor<1x16xf32>, tensor<16x32xf32>) -> tensor<1x32xf32>
    scf.yield %1 : tensor<1x32xf32>
  } {relax.dataflow}
  return %r : tensor<1x32xf32>
}

// CHECK-LABEL: func.func @prefill_scores
// CHECK: "relax.call_tir"({{.*}}) {callee = @transpose} :
// CHECK: "relax.call_tir"({{.*}}) {callee = @scores8} :
func.func @prefill_scores(%q: tensor<8x16xf32>, %k: tensor<32x16xf32>) -> tensor<8x32xf32> attributes {relax.function} {
  %r = scf.execute_region -> tensor<8x32xf32> no_inline {
    %0 = "relax.call_tir"(%k) {callee = @transpose} : (tensor<32x16xf32>) -> tensor<16x32xf32>
    %1 = "relax.call_tir"(%q, %0) {callee = @scores8} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
    scf.yield %1 : tensor<8x32xf32>
  } {relax.dataflow}
  return %r : tensor<8x32xf32>
}
