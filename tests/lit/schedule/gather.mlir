// RUN: relaxmlir-opt %s '--relax-schedule-cpu{target="llvm -mcpu=x86-64-v3" threads=1 strict=true}' -split-input-file | FileCheck %s

// A blocked max pool (`topi.nn.blocked.pool2d_nchwc`) reads its taps at clamped rows and
// columns: scalar extracts whose last index is the channel-block loop. The gather rule
// vectorizes along that loop: one 8-lane load per tap, a vector maximum, no scalar extract.
// CHECK-LABEL: func.func private @pool_taps
// CHECK-SAME: relax.schedule = ["gather-8"]
// CHECK-NOT: tensor.extract %
// CHECK: vector.transfer_read %arg0{{.*}} : tensor<1x2x8x8x8xf32>, vector<8xf32>
// CHECK: vector.transfer_read %arg0{{.*}} : tensor<1x2x8x8x8xf32>, vector<8xf32>
// CHECK: arith.maximumf {{.*}} : vector<8xf32>
// CHECK: vector.transfer_write {{.*}} : vector<8xf32>, tensor<1x1x1x8xf32>
func.func private @pool_taps(%x: tensor<1x2x8x8x8xf32>, %o: tensor<1x2x4x4x8xf32>) -> tensor<1x2x4x4x8xf32> attributes {relax.prim_func} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c7 = arith.constant 7 : index
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} outs(%o : tensor<1x2x4x4x8xf32>) {
  ^bb0(%out: f32):
    %i0 = linalg.index 0 : index
    %i1 = linalg.index 1 : index
    %i2 = linalg.index 2 : index
    %i3 = linalg.index 3 : index
    %i4 = linalg.index 4 : index
    %y = arith.muli %i2, %c2 : index
    %y0 = arith.subi %y, %c1 : index
    %y1 = arith.maxsi %y0, %c0 : index
    %x2 = arith.muli %i3, %c2 : index
    %x3 = arith.minsi %x2, %c7 : index
    %a = tensor.extract %x[%i0, %i1, %y1, %x3, %i4] : tensor<1x2x8x8x8xf32>
    %b = tensor.extract %x[%i0, %i1, %y, %x3, %i4] : tensor<1x2x8x8x8xf32>
    %m = arith.maximumf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<1x2x4x4x8xf32>
  return %r : tensor<1x2x4x4x8xf32>
}

// -----

// Fused with the layout change back to NCHW, the channel loop is no longer the output's
// innermost. MLIR reads contiguously only along an op's last loop, so the rule moves the
// channel loop last: one vector load per tap (not a vector.gather), a strided write.
// CHECK-LABEL: func.func private @pool_to_nchw
// CHECK-SAME: relax.schedule = ["gather-8"]
// CHECK-NOT: tensor.extract %
// CHECK-NOT: vector.gather
// CHECK: vector.transfer_read %arg0{{.*}} : tensor<2x1x4x4x8xf32>, vector<8xf32>
// CHECK: vector.transfer_read %arg0{{.*}} : tensor<2x1x4x4x8xf32>, vector<8xf32>
// CHECK: arith.maximumf {{.*}} : vector<8xf32>
// CHECK: vector.transfer_write {{.*}} : vector<8x1x1xf32>, tensor<1x8x1x1xf32>
func.func private @pool_to_nchw(%x: tensor<2x1x4x4x8xf32>, %o: tensor<2x8x2x2xf32>) -> tensor<2x8x2x2xf32> attributes {relax.prim_func} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%o : tensor<2x8x2x2xf32>) {
  ^bb0(%out: f32):
    %n = linalg.index 0 : index
    %c = linalg.index 1 : index
    %i = linalg.index 2 : index
    %j = linalg.index 3 : index
    %y = arith.muli %i, %c2 : index
    %x0 = arith.muli %j, %c2 : index
    %x1 = arith.addi %x0, %c1 : index
    %a = tensor.extract %x[%n, %c0, %y, %x0, %c] : tensor<2x1x4x4x8xf32>
    %b = tensor.extract %x[%n, %c0, %y, %x1, %c] : tensor<2x1x4x4x8xf32>
    %m = arith.maximumf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<2x8x2x2xf32>
  return %r : tensor<2x8x2x2xf32>
}

// -----

// An extract whose row depends on the loop that walks the last axis is a real gather (a
// diagonal): the rule does not take it and the op keeps its loops.
// CHECK-LABEL: func.func private @diagonal
// CHECK-SAME: relax.schedule = ["fallback"]
// CHECK: tensor.extract %arg0
func.func private @diagonal(%x: tensor<8x8xf32>, %o: tensor<8xf32>) -> tensor<8xf32> attributes {relax.prim_func} {
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} outs(%o : tensor<8xf32>) {
  ^bb0(%out: f32):
    %i = linalg.index 0 : index
    %a = tensor.extract %x[%i, %i] : tensor<8x8xf32>
    linalg.yield %a : f32
  } -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// The row read comes from an operand indexed by the vector's loop: a gather per lane, not a
// contiguous read. The rule does not take it.
// CHECK-LABEL: func.func private @row_from_operand
// CHECK-SAME: relax.schedule = ["fallback"]
func.func private @row_from_operand(%x: tensor<8x8xf32>, %rows: tensor<8xi64>, %o: tensor<8xf32>) -> tensor<8xf32> attributes {relax.prim_func} {
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%rows : tensor<8xi64>) outs(%o : tensor<8xf32>) {
  ^bb0(%row: i64, %out: f32):
    %i = linalg.index 0 : index
    %k = arith.index_cast %row : i64 to index
    %a = tensor.extract %x[%k, %i] : tensor<8x8xf32>
    linalg.yield %a : f32
  } -> tensor<8xf32>
  return %r : tensor<8xf32>
}
