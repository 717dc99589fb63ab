// The MLC tutorial's MLP (examples/mlp.py, batch symbolic as `n`) as printed by IRModule.show(),
// compiled for the CPU and run by relaxmlir-run.
// RUN: %PYTHON -c "import numpy as np; np.savez('%t.npz', x=np.full((2, 784), 0.5, 'float32'), \
// RUN:   w0=np.ones((128, 784), 'float32'), b0=np.ones(128, 'float32'), \
// RUN:   w1=np.ones((10, 128), 'float32'), b1=np.arange(10, dtype='float32'))"
// RUN: relaxmlir-run %s --inputs %t.npz | FileCheck %s
// RUN: relaxmlir-run %s --random --dim n=3 --seed 1 --time 3 | FileCheck %s --check-prefix=RANDOM
// RUN: relaxmlir-run %s --signature | FileCheck %s --check-prefix=SIG
// RUN: not relaxmlir-run %s --random 2>&1 | FileCheck %s --check-prefix=NODIM

// Each hidden unit is 784 * 0.5 + 1 = 393; each output 128 * 393 + b1[j] = 50304 + j.
// CHECK: array({{\[}}[50304., 50305., 50306., 50307., 50308., 50309., 50310., 50311.,
// CHECK-NEXT: 50312., 50313.],
// CHECK-NEXT: [50304., 50305., 50306., 50307., 50308., 50309., 50310., 50311.,
// CHECK-NEXT: 50312., 50313.]], dtype=float32)

// RANDOM: array({{\[}}[
// RANDOM-COUNT-3: ]{{]?}},{{$}}
// RANDOM: dtype=float32)
// RANDOM: # main: median {{[0-9.]+}} us over 3 runs

// SIG: main(x: R.Tensor(('n', 784), "float32"), w0: R.Tensor((128, 784), "float32"), {{.*}}) -> (R.Tensor(('n', 10), "float32"))

// NODIM: relaxmlir-run: error: parameter 'x' has shape ('n', 784): give the symbolic dimension(s) with --dim n=SIZE

#map = affine_map<(d0, d1, d2) -> (d0, d2)>
#map1 = affine_map<(d0, d1, d2) -> (d1, d2)>
#map2 = affine_map<(d0, d1, d2) -> (d0, d1)>
#map3 = affine_map<(d0, d1) -> (d0, d1)>
#map4 = affine_map<(d0, d1) -> (d1)>
module {
  func.func @main(%x: tensor<?x784xf32> {relax.name = "x", relax.shape = ["n", 784]}, %w0: tensor<128x784xf32> {relax.name = "w0"}, %b0: tensor<128xf32> {relax.name = "b0"}, %w1: tensor<10x128xf32> {relax.name = "w1"}, %b1: tensor<10xf32> {relax.name = "b1"}) -> tensor<?x10xf32> attributes {relax.function} {
    %0 = scf.execute_region -> tensor<?x10xf32> no_inline {
      %lv0 = "relax.call_tir"(%x, %w0, %b0) {callee = @te_linear, relax.shape = [["n", 128]]} : (tensor<?x784xf32>, tensor<128x784xf32>, tensor<128xf32>) -> tensor<?x128xf32>
      %lv2 = "relax.call_tir"(%lv0) {callee = @te_relu, relax.shape = [["n", 128]]} : (tensor<?x128xf32>) -> tensor<?x128xf32>
      %lv4 = "relax.call_tir"(%lv2, %w1, %b1) {callee = @te_linear1, relax.shape = [["n", 10]]} : (tensor<?x128xf32>, tensor<10x128xf32>, tensor<10xf32>) -> tensor<?x10xf32>
      scf.yield %lv4 : tensor<?x10xf32>
    } {relax.dataflow}
    return %0 : tensor<?x10xf32>
  }
  func.func private @te_linear(%arg0: tensor<?x784xf32> {relax.shape = ["n", 784]}, %arg1: tensor<128x784xf32>, %arg2: tensor<128xf32>, %arg3: tensor<?x128xf32> {relax.shape = ["n", 128]}) -> tensor<?x128xf32> attributes {relax.prim_func} {
    %c0 = arith.constant 0 : index
    %dim = tensor.dim %arg0, %c0 : tensor<?x784xf32>
    %0 = tensor.empty(%dim) : tensor<?x128xf32>
    %cst = arith.constant 0.000000e+00 : f32
    %1 = linalg.fill ins(%cst : f32) outs(%0 : tensor<?x128xf32>) -> tensor<?x128xf32>
    %2 = linalg.generic {indexing_maps = [#map, #map1, #map2], iterator_types = ["parallel", "parallel", "reduction"]} ins(%arg0, %arg1 : tensor<?x784xf32>, tensor<128x784xf32>) outs(%1 : tensor<?x128xf32>) {
    ^bb0(%in: f32, %in_0: f32, %out: f32):
      %4 = arith.mulf %in, %in_0 : f32
      %5 = arith.addf %out, %4 : f32
      linalg.yield %5 : f32
    } -> tensor<?x128xf32>
    %3 = linalg.generic {indexing_maps = [#map3, #map4, #map3], iterator_types = ["parallel", "parallel"]} ins(%2, %arg2 : tensor<?x128xf32>, tensor<128xf32>) outs(%arg3 : tensor<?x128xf32>) {
    ^bb0(%in: f32, %in_0: f32, %out: f32):
      %4 = arith.addf %in, %in_0 : f32
      linalg.yield %4 : f32
    } -> tensor<?x128xf32>
    return %3 : tensor<?x128xf32>
  }
  func.func private @te_relu(%arg0: tensor<?x128xf32> {relax.shape = ["n", 128]}, %arg1: tensor<?x128xf32> {relax.shape = ["n", 128]}) -> tensor<?x128xf32> attributes {relax.prim_func} {
    %0 = linalg.generic {indexing_maps = [#map3, #map3], iterator_types = ["parallel", "parallel"]} ins(%arg0 : tensor<?x128xf32>) outs(%arg1 : tensor<?x128xf32>) {
    ^bb0(%in: f32, %out: f32):
      %cst = arith.constant 0.000000e+00 : f32
      %1 = arith.maximumf %in, %cst : f32
      linalg.yield %1 : f32
    } -> tensor<?x128xf32>
    return %0 : tensor<?x128xf32>
  }
  func.func private @te_linear1(%arg0: tensor<?x128xf32> {relax.shape = ["n", 128]}, %arg1: tensor<10x128xf32>, %arg2: tensor<10xf32>, %arg3: tensor<?x10xf32> {relax.shape = ["n", 10]}) -> tensor<?x10xf32> attributes {relax.prim_func} {
    %c0 = arith.constant 0 : index
    %dim = tensor.dim %arg0, %c0 : tensor<?x128xf32>
    %0 = tensor.empty(%dim) : tensor<?x10xf32>
    %cst = arith.constant 0.000000e+00 : f32
    %1 = linalg.fill ins(%cst : f32) outs(%0 : tensor<?x10xf32>) -> tensor<?x10xf32>
    %2 = linalg.generic {indexing_maps = [#map, #map1, #map2], iterator_types = ["parallel", "parallel", "reduction"]} ins(%arg0, %arg1 : tensor<?x128xf32>, tensor<10x128xf32>) outs(%1 : tensor<?x10xf32>) {
    ^bb0(%in: f32, %in_0: f32, %out: f32):
      %4 = arith.mulf %in, %in_0 : f32
      %5 = arith.addf %out, %4 : f32
      linalg.yield %5 : f32
    } -> tensor<?x10xf32>
    %3 = linalg.generic {indexing_maps = [#map3, #map4, #map3], iterator_types = ["parallel", "parallel"]} ins(%2, %arg2 : tensor<?x10xf32>, tensor<10xf32>) outs(%arg3 : tensor<?x10xf32>) {
    ^bb0(%in: f32, %in_0: f32, %out: f32):
      %4 = arith.addf %in, %in_0 : f32
      linalg.yield %4 : f32
    } -> tensor<?x10xf32>
    return %3 : tensor<?x10xf32>
  }
}

